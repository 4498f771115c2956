"""`trainfit.report.document.planned`: the report of a spec file's plan results."""

from __future__ import annotations

import json

from tests.report.document.wide import CLAIMS, MODEL
from trainfit.report.document import write_report


def test_a_spec_files_title_and_claims_are_used(planned, tmp_path) -> None:
    from trainfit.report.document import plan_report
    from trainfit.specfile import PlanFile, PlanOptions, PlanResult

    plan_file = PlanFile(title="From the file", claims=[CLAIMS[1]])  # type: ignore[list-item]
    result = PlanResult(options=PlanOptions(model=MODEL), name="wide_mlp", plan=planned)
    write_report(plan_report([result], plan_file), tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["title"] == "From the file" and data["claims"][0]["what"] == "model size"
