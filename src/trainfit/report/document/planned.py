"""`plan_report(results)`: the report of `trainfit.run_plan` / `run_plan_file` results."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trainfit.errors import check_argument
from trainfit.estimator.forward import parameter_count
from trainfit.plan.options import Plan
from trainfit.plan.stages import StagedPlan
from trainfit.report.document.build import ServingOnly, build_report
from trainfit.report.document.model import InferenceRow, Report
from trainfit.report.document.serving import inference_rows
from trainfit.specfile.run import PlanResult
from trainfit.specfile.schema import PlanFile


def serving_rows(result: PlanResult) -> tuple[InferenceRow, ...]:
    """A model's inference table: its serving or generation estimates as rows."""
    return inference_rows(result.generation or result.serving)


def plan_report(
    models: Sequence[PlanResult],
    plan_file: PlanFile | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """One report of every model planned: under their spec-file names, with the file's title,
    description and claims when `plan_file` is given; the exports asked for beside the configs
    (the last model's `export`)."""
    for result in models if isinstance(models, (list, tuple)) else [models]:
        check_argument("plan_report", "models", result, PlanResult, "a list of run_plan's results")
    plans: list[Plan | StagedPlan | ServingOnly] = []
    for result in models:
        if result.plan is not None:
            plans.append(result.plan)
        elif result.serving_spec is not None:
            # NB: the spec's model: a live model's import path (the report names its class)
            model = result.serving_spec.model
            plans.append(ServingOnly(model=model, parameters=parameter_count(result.serving_spec)))
    tables = [serving_rows(result) for result in models]
    names = [r.name for r in models if r.name is not None]
    return build_report(
        plans,
        title=(plan_file.title if plan_file is not None else None) or None,
        description=(plan_file.description if plan_file is not None else None) or "",
        claims=(plan_file.claims if plan_file is not None else None) or (),
        names=names if plan_file is not None else None,
        inference=tables if any(tables) else None,
        exports=models[-1].options.export if models else (),
        progress=progress,
    )
