"""The pieces of a rendered document: a `Block` and the number formats of the report."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainfit.hardware import units


@dataclass(frozen=True, kw_only=True, slots=True)
class Block:
    """One piece of the document."""

    kind: str
    """heading | text | table | list (rows of one cell) | code | image | links | open (a
    collapsible section begins, `text` its label) | close (it ends)"""
    text: str = ""
    level: int = 0
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    """(label, relative path)."""


def heading(level: int, text: str) -> Block:
    return Block(kind="heading", level=level, text=text)


def para(text: str) -> Block:
    return Block(kind="text", text=text)


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> Block:
    return Block(kind="table", header=header, rows=tuple(rows))


def gib(n: float | None) -> str:
    return "-" if n is None else units.gib(float(n))


def num(x: object, fmt: str = ",.2f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, fmt)


def amount(x: float | None) -> str:
    """Hours: two decimals from 1 on, three significant digits below (a short run's
    0.0042 h is not 0.00)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    v = float(x)
    if v == 0 or abs(v) >= 1:
        return f"{v:,.2f}"
    return f"{v:.3g}"
