"""Plan spec files: `trainfit plan spec.yaml` (the format: docs/spec-file.md).

schema    the typed sections (PlanFile, ModelEntry, Training, Data, Cost, Claim ...)
loader    safe YAML nodes -> PlanFile, every problem with its line (SpecFileError)
fields    which `trainfit plan` option each field sets
options   PlanOptions (one model's plan, typed) and a file resolved into them
checks    the run, stage, LoRA and calibration options read into typed values
run       run_plan / run_plan_file: typed options in, typed results (PlanResult) out
check     check_plan_file: every model fits its devices and grew no more than a baseline allows
baseline  the committed baseline of `trainfit check` (Footprint per model x device)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# NB: the names are imported on first use: `trainfit estimate` reads its run options with
# `trainfit.specfile.checks`, and importing the package's runner (the plan, the exporters)
# for that would cost the estimate about 35 modules it never uses
if TYPE_CHECKING:
    from trainfit.specfile.fields import FIELDS, Field
    from trainfit.specfile.loader import load_plan_spec, parse_plan_spec
    from trainfit.specfile.options import ModelOptions, PlanOptions, resolve_plan_file
    from trainfit.specfile.run import (
        FilesWritten,
        PlanFileResult,
        PlanResult,
        run_plan,
        run_plan_file,
    )
    from trainfit.specfile.schema import (
        Claim,
        ClaimCompare,
        ClaimQuantity,
        ClaimReason,
        ClaimSetting,
        ClaimVersus,
        Cost,
        Data,
        Inference,
        Lora,
        Measured,
        ModelEntry,
        Outputs,
        PlanFile,
        Preference,
        StageEntry,
        Training,
    )

_HOMES = {
    "FIELDS": "trainfit.specfile.fields",
    "Field": "trainfit.specfile.fields",
    "load_plan_spec": "trainfit.specfile.loader",
    "parse_plan_spec": "trainfit.specfile.loader",
    "ModelOptions": "trainfit.specfile.options",
    "PlanOptions": "trainfit.specfile.options",
    "resolve_plan_file": "trainfit.specfile.options",
    "FilesWritten": "trainfit.specfile.run",
    "PlanFileResult": "trainfit.specfile.run",
    "PlanResult": "trainfit.specfile.run",
    "run_plan": "trainfit.specfile.run",
    "run_plan_file": "trainfit.specfile.run",
    "Claim": "trainfit.specfile.schema",
    "ClaimCompare": "trainfit.specfile.schema",
    "ClaimQuantity": "trainfit.specfile.schema",
    "ClaimReason": "trainfit.specfile.schema",
    "ClaimSetting": "trainfit.specfile.schema",
    "ClaimVersus": "trainfit.specfile.schema",
    "Cost": "trainfit.specfile.schema",
    "Data": "trainfit.specfile.schema",
    "Inference": "trainfit.specfile.schema",
    "Lora": "trainfit.specfile.schema",
    "Measured": "trainfit.specfile.schema",
    "ModelEntry": "trainfit.specfile.schema",
    "Outputs": "trainfit.specfile.schema",
    "PlanFile": "trainfit.specfile.schema",
    "Preference": "trainfit.specfile.schema",
    "StageEntry": "trainfit.specfile.schema",
    "Training": "trainfit.specfile.schema",
}

__all__ = [
    "FIELDS",
    "Claim",
    "ClaimCompare",
    "ClaimQuantity",
    "ClaimReason",
    "ClaimSetting",
    "ClaimVersus",
    "Cost",
    "Data",
    "Field",
    "FilesWritten",
    "Inference",
    "Lora",
    "Measured",
    "ModelEntry",
    "ModelOptions",
    "Outputs",
    "PlanFile",
    "PlanFileResult",
    "PlanOptions",
    "PlanResult",
    "Preference",
    "StageEntry",
    "Training",
    "load_plan_spec",
    "parse_plan_spec",
    "resolve_plan_file",
    "run_plan",
    "run_plan_file",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'trainfit.specfile' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
