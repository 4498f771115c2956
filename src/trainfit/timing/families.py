"""Per-op-class kernel-time factors of a device family, fitted on published training
measurements (`families.json`, made by benchmarks/external/fit.py).

A family's single factor (read by trainfit.timing.step) scales every kernel; where the
calibration rows show that one kind of kernel runs relatively faster or slower on the family
than the H100's efficiencies say (convolutions through MPSGraph on Apple GPUs, GEMMs without
TF32), `op_class_factors` further multiplies the kernels of that class. The classes:
"conv" (convolutions), "gemm" (matrix multiplies and attention) and "memory" (every kernel
bound by bytes moved: elementwise ops, reductions, normalisation, copies, the optimizer's
multi-tensor kernels, recurrent layers).

A family may also carry its own matmul efficiency per precision (`MatmulEfficiency`), read off
published large GEMMs on its cards rather than fitted on training steps: GeForce cards run
FP32 GEMMs on CUDA cores at ~65-70% of the catalog's rate and TF32/FP16/BF16 ones on tensor
cores at ~100%, where the calibration GPU's are 74% and 66-78%. A family whose cards differ
too much for one figure (the data centre's: a 70 W T4 reaches ~53% of its FP32 rate, an A100
~93-98%) carries one per card instead (`by_card`): each card with published GEMMs takes its
own, the others keep the calibration GPU's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from trainfit.trace.costs import OpKind

OP_CLASSES = ("conv", "gemm", "memory")
_CLASS_OF = {OpKind.CONV: "conv", OpKind.MATMUL: "gemm", OpKind.ATTENTION: "gemm"}


def op_class(kind: OpKind) -> str:
    """The factor class of an op kind: "conv", "gemm" or "memory"."""
    return _CLASS_OF.get(kind, "memory")


def check_classes(factors: Mapping[str, float]) -> dict[str, float]:
    """`factors` as a dict, after checking its classes (an unknown class is an error)."""
    unknown = sorted(set(factors) - set(OP_CLASSES))
    if unknown:
        raise ValueError(f"unknown op classes {unknown}; the classes are {list(OP_CLASSES)}")
    return {name: float(value) for name, value in factors.items()}


@cache
def _by_device() -> dict[str, dict[str, float]]:
    raw = json.loads(resources.files("trainfit.timing").joinpath("families.json").read_text())
    out: dict[str, dict[str, float]] = {}
    for family in raw["families"].values():
        factors = family.get("op_class_factors")
        if family.get("device_time_factor") is None or not factors:
            continue
        out.update({device: check_classes(factors) for device in family["devices"]})
    return out


def class_factors(device: str) -> dict[str, float]:
    """The op-class factors of a catalog device's family ({} where its family has none)."""
    return dict(_by_device().get(device, {}))


def scale_of(factors: Mapping[str, float], kind: OpKind) -> float:
    """The multiplier of an op of `kind` under `factors` (1 for a class not listed)."""
    return factors.get(op_class(kind), 1.0)


@dataclass(frozen=True, slots=True)
class MatmulEfficiency:
    """A device family's large-GEMM efficiency per precision: achieved over catalog FLOP/s."""

    family: str
    by_precision: tuple[tuple[str, float], ...]
    """(precision, efficiency) pairs; a precision absent keeps the calibration GPU's."""
    source: str

    def get(self, precision: str) -> float | None:
        """The efficiency at `precision`, None where the family has none."""
        return dict(self.by_precision).get(precision)


@cache
def _efficiency_by_device() -> dict[str, MatmulEfficiency]:
    raw = json.loads(resources.files("trainfit.timing").joinpath("families.json").read_text())
    out: dict[str, MatmulEfficiency] = {}
    for name, family in raw["families"].items():
        entry = family.get("matmul_efficiency")
        if not entry:
            continue
        if "by_card" in entry:
            for card, figures in entry["by_card"].items():
                if card not in family["devices"]:
                    raise ValueError(f"family {name}: matmul efficiency for {card}, not a member")
                out[card] = _efficiency(name, figures, entry["source"])
            continue
        own = _efficiency(name, entry["by_precision"], entry["source"])
        out.update({device: own for device in family["devices"]})
    return out


def _efficiency(family: str, figures: Mapping[str, float], source: str) -> MatmulEfficiency:
    pairs = tuple((p, float(v)) for p, v in sorted(figures.items()))
    for precision, value in pairs:
        if not 0 < value < 2:
            raise ValueError(f"family {family}: matmul efficiency {value} at {precision}")
    return MatmulEfficiency(family=family, by_precision=pairs, source=source)


def matmul_efficiency(device: str) -> MatmulEfficiency | None:
    """The matmul efficiency of a catalog device's family (None where it has none)."""
    return _efficiency_by_device().get(device)
