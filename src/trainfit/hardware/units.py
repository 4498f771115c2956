"""Bytes in binary units: the gibibyte every figure of memory is shown in, and its words."""

from __future__ import annotations

GIB = 1 << 30
"""Bytes in a gibibyte (2**30)."""


def gib(n: float) -> str:
    """Bytes as GiB with two decimals ("1.50 GiB")."""
    return f"{n / GIB:.2f} GiB"
