"""A training monitor for the user's own loop, Lightning and the Hugging Face Trainer.

`Monitor` samples memory and GPU counters per optimizer step and writes them to the console, a
CSV file and TensorBoard; on out-of-memory it says where in the step it happened and the next
rung of the low-memory ladder. The adapters (`TrainfitCallback` for Lightning,
`TrainfitTrainerCallback` for transformers) are imported on first use, so that this package
imports without either framework.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trainfit.monitor.core import Monitor
from trainfit.monitor.notes import MonitorNote
from trainfit.monitor.oom import NextRung, OomReport
from trainfit.monitor.phase import StepPhase
from trainfit.monitor.sample import Sample
from trainfit.monitor.sources import (
    CpuMemory,
    CudaMemory,
    FakeGpu,
    FakeMemory,
    GpuReading,
    GpuSource,
    MemoryReading,
    MemorySource,
    MpsMemory,
    NoGpu,
    NvmlSource,
)

if TYPE_CHECKING:
    from trainfit.monitor.hf import TrainfitTrainerCallback
    from trainfit.monitor.lightning import TrainfitCallback

_LAZY = {
    "TrainfitCallback": "trainfit.monitor.lightning",
    "TrainfitTrainerCallback": "trainfit.monitor.hf",
}

__all__ = [
    "CpuMemory",
    "CudaMemory",
    "FakeGpu",
    "FakeMemory",
    "GpuReading",
    "GpuSource",
    "MemoryReading",
    "MemorySource",
    "Monitor",
    "MonitorNote",
    "MpsMemory",
    "NextRung",
    "NoGpu",
    "NvmlSource",
    "OomReport",
    "Sample",
    "StepPhase",
    "TrainfitCallback",
    "TrainfitTrainerCallback",
]


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module 'trainfit.monitor' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
