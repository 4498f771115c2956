"""How each figure of an estimate was obtained: a provenance (typed) and its words.

A `FigureLabel` is the label's text (what the JSON and the reports print) that also carries its
`Provenance`, so that a renderer picks out, say, the modelled figures by kind, never by reading
its own words.
"""

from __future__ import annotations

from enum import Enum


class Provenance(str, Enum):
    """Where a figure comes from."""

    TRACED = "traced"
    """Read off the traced step (fake tensors on the target's rules)."""
    SIMULATED = "simulated"
    """A replay of the traced allocations through a model of the real allocator."""
    MEASURED = "measured"
    """A constant measured on the device (or one of its model)."""
    MODELLED = "modelled"
    """From a model not checked on this device."""
    EXACT = "exact"
    """Counted from the model's own tensors."""
    DEFAULT = "default"
    """A library's documented default size."""
    NOT_MODELLED = "not modelled"
    """Left out of the estimate (said so)."""


class FigureLabel(str):
    """The words of a label (a `str`: JSON and reports print it as is) and its `provenance`."""

    provenance: Provenance

    def __new__(cls, provenance: Provenance, text: str) -> FigureLabel:
        label = super().__new__(cls, text)
        label.provenance = provenance
        return label

    def __getnewargs__(self) -> tuple[Provenance, str]:  # type: ignore[override]
        # NB: str's own __getnewargs__ gives (text,); a label is rebuilt from both (pickling
        # across the planner's worker processes).
        return (self.provenance, str(self))


__all__ = ["FigureLabel", "Provenance"]
