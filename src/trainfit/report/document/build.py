"""`build_report(plans, ...)`: a `Report` from plans (and staged plans), computed once for
every renderer. A live model (`trainfit.models.live`) is named by its class, never by its
import path (valid only in the process that planned it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from trainfit.errors import SpecError, TrainfitError, check_argument
from trainfit.export.formats import export_format, live_export_problems
from trainfit.models.live_names import is_live, model_label, model_name
from trainfit.plan.options import Plan
from trainfit.plan.stages import StagedPlan
from trainfit.report.document.claims import check_claims
from trainfit.report.document.memory import device_memory
from trainfit.report.document.model import (
    ConfigFile,
    InferenceRow,
    ModelSection,
    Report,
    StageSection,
    slug,
)
from trainfit.report.document.verify import verify_commands
from trainfit.timing.run import RunSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class ServingOnly:
    """A model planned for serving only (no training plan): the report shows its inference
    table (`build_report(inference=...)`) and no training sections."""

    model: str
    """What the model was named by (a live model's import path: the report names its class)."""
    parameters: int
    """All parameters."""


def short_name(model: str) -> str:
    """A model's default name in a report: a factory's function, a path's or hub id's last
    part ("trainfit.models.zoo:melody_transformer" -> "melody_transformer"); a live model's
    class."""
    if is_live(model):
        return model_name(model)
    return model.rsplit(":", 1)[-1].rstrip("/").rsplit("/", 1)[-1] or model


def build_report(
    plans: Sequence[Plan | StagedPlan | ServingOnly],
    *,
    title: str | None = None,
    description: str = "",
    claims: Iterable[object] = (),
    run: RunSpec | None = None,
    names: Sequence[str] | None = None,
    inference: Sequence[Sequence[InferenceRow]] | None = None,
    exports: Sequence[str] = (),
    extra: Mapping[str, object] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """The report of `plans` (one per model), named `names` (default: `short_name`).

    `claims` (a spec file's, or `Claim`s) are compared with trainfit's figures (SpecError
    naming each that cannot be found); `exports` (hf, lightning, accelerate, yaml) adds each
    device's export files beside the seed-style configs; `inference` gives each model's
    inference rows; `extra` adds sections other pieces make ({title: JSON value}, shown as
    JSON); `progress` is told what is being done.
    """
    plans, names, exports = _checked(plans, title, names, exports)
    if not plans:
        raise SpecError(["a report needs at least one plan"])
    if names is not None and len(names) != len(plans):
        raise SpecError([f"{len(names)} names for {len(plans)} plans: give one name per plan"])
    if inference is not None and len(inference) != len(plans):
        raise SpecError([f"{len(inference)} inference tables for {len(plans)} plans"])
    sections = []
    for index, one in enumerate(plans):
        if isinstance(one, ServingOnly):
            model = one.model
        else:
            model = (one.stages[0].plan if isinstance(one, StagedPlan) else one).spec.model
        if is_live(model) and (problems := live_export_problems(model_name(model), exports)):
            raise SpecError(problems)
        name = names[index] if names is not None else short_name(model)
        if progress is not None:
            progress(f"report: {name}")
        sections.append(
            _model_section(one, name, () if inference is None else tuple(inference[index]), exports)
        )
    if len({s.name for s in sections}) != len(sections):
        raise SpecError(["two models share a name in the report: give each its own name"])
    trained = [p for p in plans if not isinstance(p, ServingOnly)]
    run = run if run is not None or not trained else _run_of(trained[0])
    return Report(
        title=title or "trainfit plan: " + ", ".join(s.name for s in sections),
        description=description,
        models=tuple(sections),
        claims=check_claims(claims, sections),
        run=None if run is None else _plain_dict(dataclasses.asdict(run)),
        extra=_plain_dict(extra or {}),
    )


def _checked(
    plans: object, title: object, names: object, exports: object
) -> tuple[list[Plan | StagedPlan | ServingOnly], list[str] | None, tuple[str, ...]]:
    """`build_report`'s plans, names and exports checked, one line for a wrong one: one
    plan, name or format may be given alone; exports by their values (any case)."""
    kinds = (Plan, StagedPlan, ServingOnly)
    listed = list(plans) if isinstance(plans, (list, tuple)) else [plans]
    hint = "plan(...) or plan_stages(...) results, or ServingOnly(...)"
    for one in listed:
        check_argument("build_report", "plans", one, kinds, hint)
    if title is not None:
        check_argument("build_report", "title", title, str, "the report's title")
    chosen = None
    if names is not None:
        chosen = [names] if isinstance(names, str) else list(names)  # type: ignore[call-overload]
        for name in chosen:
            check_argument("build_report", "names", name, str, "one name per plan")
    formats = [exports] if isinstance(exports, str) else list(exports)  # type: ignore[call-overload]
    return listed, chosen, tuple(export_format(f).value for f in formats)


def _run_of(one: Plan | StagedPlan) -> RunSpec | None:
    return (one.stages[-1].plan if isinstance(one, StagedPlan) else one).run


def _plain_dict(value: Mapping[str, object]) -> dict[str, object]:
    """A mapping as JSON-ready values, its keys sorted."""
    return {str(k): _plain(v) for k, v in sorted(value.items())}


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return _plain_dict(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _model_section(
    one: Plan | StagedPlan | ServingOnly,
    name: str,
    inference: tuple[InferenceRow, ...],
    exports: Sequence[str],
) -> ModelSection:
    if isinstance(one, ServingOnly):
        return ModelSection(
            name=name,
            model=model_label(one.model),
            parameters=one.parameters,
            trainable_parameters=0,
            tokens_per_sample=None,
            stages=(),
            inference=inference,
        )
    staged = isinstance(one, StagedPlan)
    stages = (
        [(s.name, s.epochs, s.freeze, s.plan) for s in one.stages]
        if isinstance(one, StagedPlan)
        else [("", None, (), one)]
    )
    out = []
    for number, (stage, epochs, freeze, plan) in enumerate(stages, 1):
        where = f"configs/{slug(name)}" + (f"/stage{number}" if staged else "")
        out.append(
            StageSection(
                name=stage,
                epochs=epochs,
                freeze=tuple(freeze),
                plan=plan,
                memory=tuple(device_memory(plan, d) for d in plan.devices),
                verify=tuple(v for d in plan.devices if (v := verify_commands(plan, d))),
                configs=_configs(plan, where, exports),
            )
        )
    last = stages[-1][3]
    return ModelSection(
        name=name,
        model=model_label(last.spec.model),
        parameters=last.parameters,
        trainable_parameters=last.trainable_parameters,
        tokens_per_sample=last.tokens_per_sample,
        stages=tuple(out),
        schedule=one.devices if isinstance(one, StagedPlan) else (),
        inference=inference,
    )


def _configs(plan: Plan, where: str, exports: Sequence[str]) -> tuple[ConfigFile, ...]:
    """Each device's seed-style config (undated) and the export files asked for."""
    from trainfit.export.configs import config_text
    from trainfit.export.formats import ExportFormat, export_name
    from trainfit.export.layout import trainer_layout
    from trainfit.export.write import export_text

    files = []
    for d in plan.devices:
        if d.setting is not None:
            files.append(
                ConfigFile(
                    path=f"{where}/config_{d.device}.yaml",
                    device=d.device,
                    text=config_text(plan, d, dated=False),
                )
            )
        for fmt in exports:
            fmt = ExportFormat(fmt)
            try:
                lay = trainer_layout(plan, d)
                if fmt is ExportFormat.YAML:
                    if d.setting is None:
                        continue
                    text = config_text(plan, d, lay, dated=False)
                else:
                    text = export_text(plan, d, fmt)
            except TrainfitError:
                continue  # NB: a device with nothing to export (as `write_exports` skips it)
            files.append(
                ConfigFile(path=f"{where}/{export_name(fmt, d.device)}", device=d.device, text=text)
            )
    return tuple(files)
