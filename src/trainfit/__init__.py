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
    from trainfit.estimator.generation import InferenceEstimate, estimate_inference
    from trainfit.estimator.result import Breakdown, Estimate
    from trainfit.estimator.scaling import MaxBatch, max_micro_batch
    from trainfit.estimator.step import estimate
    from trainfit.estimator.storage import InferencePrecision
    from trainfit.spec import (
        InputSpec,
        LoraSpec,
        OptimizerKind,
        Precision,
        PreferenceKind,
        ReferenceKind,
        TrainSpec,
    )
    from trainfit.specfile import (
        PlanFile,
        PlanFileResult,
        PlanOptions,
        PlanResult,
        load_plan_spec,
        run_plan,
        run_plan_file,
    )

_HOMES = {
    "Breakdown": "trainfit.estimator.result",
    "Diagnosis": "trainfit.measure.diagnosis",
    "DistributedPlan": "trainfit.distributed.search",
    "Estimate": "trainfit.estimator.result",
    "Fit": "trainfit.autofitter.fit",
    "ForwardEstimate": "trainfit.estimator.forward",
    "InferenceEstimate": "trainfit.estimator.generation",
    "InferencePrecision": "trainfit.estimator.storage",
    "InputSpec": "trainfit.spec",
    "LatencyTable": "trainfit.measure.latency",
    "LoraSpec": "trainfit.spec",
    "MaxBatch": "trainfit.estimator.scaling",
    "MeasureError": "trainfit.errors",
    "Measured": "trainfit.measure.steps",
    "ModelLoadError": "trainfit.errors",
    "Monitor": "trainfit.monitor.core",
    "Offload": "trainfit.distributed.strategy",
    "OomReport": "trainfit.monitor.oom",
    "OptimizerKind": "trainfit.spec",
    "PlanFile": "trainfit.specfile",
    "PlanFileResult": "trainfit.specfile",
    "PlanOptions": "trainfit.specfile",
    "PlanResult": "trainfit.specfile",
    "Precision": "trainfit.spec",
    "PreferenceKind": "trainfit.spec",
    "RankMemory": "trainfit.distributed.memory",
    "RealMaxBatch": "trainfit.measure.max_batch",
    "ReferenceKind": "trainfit.spec",
    "Report": "trainfit.report.document",
    "RunEstimate": "trainfit.timing.run",
    "RunSpec": "trainfit.timing.run",
    "ServingRefusal": "trainfit.estimator.forward",
    "SpecError": "trainfit.errors",
    "SpecFileError": "trainfit.errors",
    "Stage": "trainfit.timing.run",
    "StagedPlan": "trainfit.plan.stages",
    "StepTime": "trainfit.timing.step",
    "Strategy": "trainfit.distributed.strategy",
    "TraceError": "trainfit.errors",
    "TrainSpec": "trainfit.spec",
    "TrainfitError": "trainfit.errors",
    "UnknownNameError": "trainfit.errors",
    "autofit": "trainfit.autofitter.core",
    "build_report": "trainfit.report.document",
    "diagnose": "trainfit.measure.doctor",
    "estimate": "trainfit.estimator.step",
    "estimate_forward": "trainfit.estimator.forward",
    "estimate_inference": "trainfit.estimator.generation",
    "estimate_run": "trainfit.timing.run",
    "estimate_serving": "trainfit.estimator.forward",
    "find_max_batch": "trainfit.measure.max_batch",
    "load_plan_spec": "trainfit.specfile",
    "max_micro_batch": "trainfit.estimator.scaling",
    "measure_latency": "trainfit.measure.latency",
    "plan_distributed": "trainfit.distributed.search",
    "plan_report": "trainfit.report.document",
    "plan_stages": "trainfit.plan.stages",
    "run_plan": "trainfit.specfile",
    "run_plan_file": "trainfit.specfile",
    "write_report": "trainfit.report.document",
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
    "PlanFileResult",
    "PlanOptions",
    "PlanResult",
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
    "plan_report",
    "plan_stages",
    "run_plan",
    "run_plan_file",
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
