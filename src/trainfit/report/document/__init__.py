"""A plan's report as files: Markdown, JSON, PNG plots and one self-contained HTML file.

`build_report(plans, ...)` computes a `Report` once; `to_markdown`, `to_json`, `to_html` and
`write_plots` render it; `write_report` writes them all (and the config files) to a directory.
"""

from trainfit.report.document.build import ServingOnly, build_report
from trainfit.report.document.claims import QUANTITIES, check_claims
from trainfit.report.document.model import (
    Claim,
    ClaimCheck,
    ConfigFile,
    CurvePoint,
    DeviceMemory,
    InferenceRow,
    ModelSection,
    Report,
    StageSection,
    Verify,
)
from trainfit.report.document.planned import plan_report, serving_rows
from trainfit.report.document.plots import render_plots, write_plots
from trainfit.report.document.render import to_html, to_json, to_markdown
from trainfit.report.document.serving import inference_row, inference_rows
from trainfit.report.document.write import write_report

__all__ = [
    "QUANTITIES",
    "Claim",
    "ClaimCheck",
    "ConfigFile",
    "CurvePoint",
    "DeviceMemory",
    "InferenceRow",
    "ModelSection",
    "Report",
    "ServingOnly",
    "StageSection",
    "Verify",
    "build_report",
    "check_claims",
    "inference_row",
    "inference_rows",
    "plan_report",
    "render_plots",
    "serving_rows",
    "to_html",
    "to_json",
    "to_markdown",
    "write_plots",
    "write_report",
]
