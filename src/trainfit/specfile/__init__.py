"""Plan spec files: `trainfit plan spec.yaml` (the format: docs/spec-file.md).

schema    the typed sections (PlanFile, ModelEntry, Training, Data, Cost, Claim ...)
loader    safe YAML nodes -> PlanFile, every problem with its line (SpecFileError)
fields    which `trainfit plan` option each field sets
"""

from __future__ import annotations

from trainfit.specfile.fields import FIELDS, Field
from trainfit.specfile.loader import load_plan_spec, parse_plan_spec
from trainfit.specfile.schema import (
    Claim,
    ClaimQuantity,
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
    "ClaimQuantity",
    "Cost",
    "Data",
    "Field",
    "Inference",
    "Lora",
    "Measured",
    "ModelEntry",
    "Outputs",
    "PlanFile",
    "Preference",
    "StageEntry",
    "Training",
    "load_plan_spec",
    "parse_plan_spec",
]
