"""trainfit: will this training job fit on this device, and with which settings?"""

from trainfit.errors import (
    MeasureError,
    ModelLoadError,
    SpecError,
    TraceError,
    TrainfitError,
    UnknownNameError,
)
from trainfit.estimate import Breakdown, Estimate, estimate
from trainfit.memory.scaling import MaxBatch, max_micro_batch
from trainfit.spec import InputSpec, OptimizerKind, Precision, TrainSpec

__all__ = [
    "Breakdown",
    "Estimate",
    "InputSpec",
    "MaxBatch",
    "MeasureError",
    "ModelLoadError",
    "OptimizerKind",
    "Precision",
    "SpecError",
    "TraceError",
    "TrainSpec",
    "TrainfitError",
    "UnknownNameError",
    "estimate",
    "max_micro_batch",
]
