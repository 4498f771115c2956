"""Where each figure of an estimate comes from: its `Provenance`, which a renderer reads to pick
out, say, the modelled figures by kind, never its own words (the labels that carry it:
`trainfit.estimator.labels`)."""

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


__all__ = ["Provenance"]
