"""trainfit: will this training job fit on this device, and with which settings?

The public names are imported on first use, so that the `trainfit` command can set up its
process (see `trainfit.cli.main.entry`) before torch is imported.
"""

from __future__ import annotations

import importlib
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
    from trainfit.estimator.forward import (
        ForwardEstimate,
        ServingRefusal,
        estimate_forward,
        estimate_serving,
    )
    from trainfit.estimator.generation import (
        InferenceEstimate,
        InferencePrecision,
        estimate_inference,
    )
    from trainfit.estimator.scaling import MaxBatch, max_micro_batch
    from trainfit.estimator.step import Breakdown, Estimate, estimate
    from trainfit.spec import (
        InputSpec,
        LoraSpec,
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
    "Breakdown": "trainfit.estimator.step",
    "Estimate": "trainfit.estimator.step",
    "estimate": "trainfit.estimator.step",
    "LoraSpec": "trainfit.spec",
    "MaxBatch": "trainfit.estimator.scaling",
    "max_micro_batch": "trainfit.estimator.scaling",
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
    "Diagnosis": "trainfit.measure.doctor",
    "diagnose": "trainfit.measure.doctor",
    "Monitor": "trainfit.monitor.core",
    "OomReport": "trainfit.monitor.oom",
    "autofit": "trainfit.autofitter.core",
    "Fit": "trainfit.autofitter.fit",
    "StagedPlan": "trainfit.plan.stages",
    "PlanFile": "trainfit.specfile",
    "SpecFileError": "trainfit.errors",
    "load_plan_spec": "trainfit.specfile",
    "plan_stages": "trainfit.plan.stages",
    "InferenceEstimate": "trainfit.estimator.generation",
    "InferencePrecision": "trainfit.estimator.generation",
    "estimate_inference": "trainfit.estimator.generation",
    "ForwardEstimate": "trainfit.estimator.forward",
    "ServingRefusal": "trainfit.estimator.forward",
    "estimate_forward": "trainfit.estimator.forward",
    "estimate_serving": "trainfit.estimator.forward",
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
