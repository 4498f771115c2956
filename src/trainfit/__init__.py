"""trainfit: will this training job fit on this device, and with which settings?

The public names are imported on first use, so that the `trainfit` command can set up its
process (see `trainfit.cli.main.entry`) before torch is imported.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainfit.errors import (
        MeasureError,
        ModelLoadError,
        SpecError,
        SpecFileError,
        TraceError,
        TrainfitError,
        UnknownNameError,
    )
    from trainfit.estimate import Breakdown, Estimate, estimate
    from trainfit.forward import (
        ForwardEstimate,
        ServingRefusal,
        estimate_forward,
        estimate_serving,
    )
    from trainfit.inference import InferenceEstimate, InferencePrecision, estimate_inference
    from trainfit.lora import LoraSpec
    from trainfit.memory.scaling import MaxBatch, max_micro_batch
    from trainfit.spec import (
        InputSpec,
        OptimizerKind,
        Precision,
        PreferenceKind,
        ReferenceKind,
        TrainSpec,
    )
    from trainfit.specfile import PlanFile, load_plan_spec

_HOMES = {
    "MeasureError": "trainfit.errors",
    "ModelLoadError": "trainfit.errors",
    "SpecError": "trainfit.errors",
    "TraceError": "trainfit.errors",
    "TrainfitError": "trainfit.errors",
    "UnknownNameError": "trainfit.errors",
    "Breakdown": "trainfit.estimate",
    "Estimate": "trainfit.estimate",
    "estimate": "trainfit.estimate",
    "LoraSpec": "trainfit.lora",
    "MaxBatch": "trainfit.memory.scaling",
    "max_micro_batch": "trainfit.memory.scaling",
    "InputSpec": "trainfit.spec",
    "OptimizerKind": "trainfit.spec",
    "Precision": "trainfit.spec",
    "TrainSpec": "trainfit.spec",
    "RunSpec": "trainfit.timing.run",
    "RunEstimate": "trainfit.timing.run",
    "Stage": "trainfit.timing.run",
    "estimate_run": "trainfit.timing.run",
    "StepTime": "trainfit.timing.step",
    "Measured": "trainfit.measure.steps",
    "RealMaxBatch": "trainfit.measure.max_batch",
    "find_max_batch": "trainfit.measure.max_batch",
    "LatencyTable": "trainfit.measure.latency",
    "measure_latency": "trainfit.measure.latency",
    "Diagnosis": "trainfit.doctor",
    "diagnose": "trainfit.doctor",
    "Monitor": "trainfit.monitor.core",
    "OomReport": "trainfit.monitor.oom",
    "autofit": "trainfit.autofit.core",
    "Fit": "trainfit.autofit.fit",
    "StagedPlan": "trainfit.stages",
    "PlanFile": "trainfit.specfile",
    "SpecFileError": "trainfit.errors",
    "load_plan_spec": "trainfit.specfile",
    "plan_stages": "trainfit.stages",
    "InferenceEstimate": "trainfit.inference",
    "InferencePrecision": "trainfit.inference",
    "estimate_inference": "trainfit.inference",
    "ForwardEstimate": "trainfit.forward",
    "ServingRefusal": "trainfit.forward",
    "estimate_forward": "trainfit.forward",
    "estimate_serving": "trainfit.forward",
    "PreferenceKind": "trainfit.spec",
    "ReferenceKind": "trainfit.spec",
    "Report": "trainfit.report.document",
    "build_report": "trainfit.report.document",
    "write_report": "trainfit.report.document",
    "DistributedPlan": "trainfit.distributed.search",
    "plan_distributed": "trainfit.distributed.search",
    "Offload": "trainfit.distributed.strategy",
    "Strategy": "trainfit.distributed.strategy",
    "RankMemory": "trainfit.distributed.memory",
}

__all__ = [
    "Breakdown",
    "Diagnosis",
    "DistributedPlan",
    "Estimate",
    "Fit",
    "ForwardEstimate",
    "InferenceEstimate",
    "InferencePrecision",
    "InputSpec",
    "LatencyTable",
    "LoraSpec",
    "MaxBatch",
    "MeasureError",
    "Measured",
    "ModelLoadError",
    "Monitor",
    "Offload",
    "OomReport",
    "OptimizerKind",
    "PlanFile",
    "Precision",
    "PreferenceKind",
    "RankMemory",
    "RealMaxBatch",
    "ReferenceKind",
    "Report",
    "RunEstimate",
    "RunSpec",
    "ServingRefusal",
    "SpecError",
    "SpecFileError",
    "Stage",
    "StagedPlan",
    "StepTime",
    "Strategy",
    "TraceError",
    "TrainSpec",
    "TrainfitError",
    "UnknownNameError",
    "autofit",
    "build_report",
    "diagnose",
    "estimate",
    "estimate_forward",
    "estimate_inference",
    "estimate_run",
    "estimate_serving",
    "find_max_batch",
    "load_plan_spec",
    "max_micro_batch",
    "measure_latency",
    "plan_distributed",
    "plan_stages",
    "write_report",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'trainfit' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


class _Package(types.ModuleType):
    """The package module: `trainfit.estimate` stays the function.

    NB: importing the submodule `trainfit.estimate` sets the package's attribute of that name
    to the submodule; with the names imported on first use, that would make
    `from trainfit import estimate` give the module whenever the submodule came first.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("estimate", "autofit") and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
