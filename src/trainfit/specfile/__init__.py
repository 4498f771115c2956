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

from trainfit.specfile.fields import FIELDS, Field
from trainfit.specfile.loader import load_plan_spec, parse_plan_spec
from trainfit.specfile.options import ModelOptions, PlanOptions, resolve_plan_file
from trainfit.specfile.run import FilesWritten, PlanFileResult, PlanResult, run_plan, run_plan_file
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
