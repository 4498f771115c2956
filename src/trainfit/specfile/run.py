"""Running a plan: `run_plan(options)` for one model, `run_plan_file(plan_file)` for a spec file.

Both take typed values (`PlanOptions`, a loaded `PlanFile`) and return typed results: per
model the plan (or staged plan), the serving estimates asked for with `inference`, and the
files written (`config_dir`, `export`). Nothing is printed; the report (`report`) is built
from the results by `trainfit.report.document.plan_report`.

A live model (`PlanOptions(model=module, sample=batch)`) is registered for the plan
(`trainfit.models.live`) and planned in this process; its result keeps the registration, so
that its spec's import path resolves while the result lives.

Known limitations: a model is planned after the one before it, not in parallel (each plan
uses `jobs` processes); with several models, `config_dir` and `export_dir` get a subdirectory
per model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainfit.errors import SpecError, SpecFileError, TrainfitError, check_argument
from trainfit.estimator.forward import ServingResult
from trainfit.estimator.generation import InferenceEstimate
from trainfit.estimator.storage import InferencePrecision
from trainfit.export.write import Exported
from trainfit.hardware.catalog import DEFAULT_DEVICES
from trainfit.io import StagedDirectories, check_writable_directory, staged_directories
from trainfit.models.live import Registration, live_fields, registration_of
from trainfit.models.source import model_problems
from trainfit.plan.options import Plan
from trainfit.plan.stages import StagedPlan
from trainfit.progress import Part, Reporter, reporting, tell
from trainfit.spec import Precision, TrainSpec
from trainfit.specfile.checks import check_sized, lora_fields, measured, run_spec, stages
from trainfit.specfile.loader import StructureError, load_plan_spec
from trainfit.specfile.options import (
    ModelOptions,
    PlanOptions,
    resolved_with_problems,
    where_model,
)
from trainfit.specfile.schema import PlanFile
from trainfit.timing.run import RunSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class FilesWritten:
    """The files one plan (or one stage's plan) wrote."""

    configs: tuple[Path, ...]
    """config_<device>.yaml files (`config_dir`)."""
    exported: Exported | None
    """Trainer configs written and skipped (`export`); None without it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanResult:
    """One model planned."""

    options: PlanOptions
    """What was asked."""
    name: str | None = None
    """The spec file's name for the model; None for a model planned alone."""
    plan: Plan | StagedPlan | None = None
    """The training plan; None when the model is planned for serving only."""
    serving_spec: TrainSpec | None = None
    """The model as served (with `inference`)."""
    serving: tuple[ServingResult, ...] = ()
    """The serving estimates: beside a training plan, or a non-generative model served."""
    generation: tuple[InferenceEstimate, ...] = ()
    """Serving only, a causal LM: every (device, precision, batch) generation estimate."""
    files: tuple[FilesWritten, ...] = ()
    """The files written, per plan (one per stage of a staged plan)."""
    live: Registration | None = field(default=None, repr=False, compare=False)
    """A live model's registration: its import path resolves while the result lives."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanFileResult:
    """A spec file planned: one `PlanResult` per model, in the file's order."""

    plan_file: PlanFile
    """The file (its title, description and claims are the report's)."""
    models: tuple[PlanResult, ...]
    """Each model's result."""


def run_plan_file(
    plan_file: PlanFile,
    overrides: Mapping[str, Any] | None = None,
    *,
    progress: Reporter | None = None,
    on_start: Callable[[ModelOptions], None] | None = None,
    on_model: Callable[[PlanResult], None] | None = None,
    outputs: StagedDirectories | None = None,
) -> PlanFileResult:
    """Plan every model of `plan_file` (see `resolve_plan_file` for `overrides`), in order;
    `on_start` is told which model is planned next, `on_model` is given each model's result as
    soon as it is planned (to show it before the next); `progress` (else the reporter in
    effect, `trainfit.progress`) is told each model, device, rung and trace. A model's error is
    a SpecFileError naming the model and its line. The models' files are written whole or not
    at all: into `outputs` (committed by the caller), else committed when every model is
    planned."""
    check_argument(
        "run_plan_file", "plan_file", plan_file, PlanFile, "load it with load_plan_spec(path)"
    )
    if outputs is None:
        with staged_directories() as staged:
            return run_plan_file(
                plan_file,
                overrides,
                progress=progress,
                on_start=on_start,
                on_model=on_model,
                outputs=staged,
            )
    # NB: before any model is planned (which takes seconds each): every problem at once
    resolved, problems = _file_problems(plan_file, overrides)
    if problems:
        raise SpecFileError(plan_file.source, problems)
    out = []
    for index, model in enumerate(resolved, start=1):
        if on_start is not None:
            on_start(model)
        try:
            with reporting(progress):
                tell(Part.MODEL, str(model.name), index=index, total=len(resolved))
                result = run_plan(model.options, outputs=outputs)
        except SpecFileError:
            raise
        except TrainfitError as exc:
            where = where_model(plan_file, model)
            raise SpecFileError(plan_file.source, [f"{where}: {exc}"]) from exc
        out.append(dataclasses.replace(result, name=model.name))
        if on_model is not None:
            on_model(out[-1])
    return PlanFileResult(plan_file=plan_file, models=tuple(out))


def load_checked(path: str | Path, overrides: Mapping[str, Any] | None = None) -> PlanFile:
    """`load_plan_spec`, with the problems of one round: where the file's structure or types
    are wrong, the values of its other fields are checked too (`run_plan_file`'s checks), and
    every problem is raised at once."""
    try:
        return load_plan_spec(path)
    except StructureError as exc:
        if exc.partial is None:
            raise
        _, more = _file_problems(exc.partial, overrides)
        # NB: a field left out for its problem is not missing as well
        paths = set(exc.paths)
        leaves = [
            p for p in paths if p and not any(q.startswith((p + ".", p + "[")) for q in paths)
        ]
        names = {p.rsplit(".", 1)[-1].split("[")[0] for p in leaves}
        forms = {f for n in names for f in (f".{n}", f"--{n.replace('_', '-')}")}
        forms |= {n.replace("_", " ") for n in names if "_" in n}
        kept = [p for p in more if not any(f in p for f in forms)]
        source = exc.path
        every = sorted([*exc.problems, *kept], key=lambda p: _line(source, p))
        raise SpecFileError(source, every) from None


def _line(source: str, problem: str) -> int:
    """The line a problem starts with (`spec.yaml:12: ...`), 0 for none."""
    number = problem[len(source) + 1 :].partition(":")[0]
    return int(number) if problem.startswith(source + ":") and number.isdigit() else 0


def _file_problems(
    plan_file: PlanFile, overrides: Mapping[str, Any] | None
) -> tuple[tuple[ModelOptions, ...], list[str]]:
    """Every model's options and every problem of the file that planning is not needed to
    find (the values, the models' sources, the options `run_plan` reads)."""
    resolved, problems = resolved_with_problems(plan_file, overrides)
    found = [option_problems(model.options) for model in resolved]
    shared = set.intersection(*(set(f) for f in found)) if len(found) > 1 else set()
    problems += [f"{plan_file.source}: every model: {p}" for p in found[0] if p in shared]
    for model, own in zip(resolved, found, strict=True):
        where = where_model(plan_file, model)
        problems += [f"{where}: {p}" for p in own if p not in shared]
    return resolved, list(dict.fromkeys(problems))


def run_plan(
    options: PlanOptions,
    *,
    progress: Reporter | None = None,
    outputs: StagedDirectories | None = None,
) -> PlanResult:
    """Plan one model: the settings that fit each device (per stage with `stage`), the
    serving estimates with `inference`, and the config and export files asked for, written
    whole or not at all: into `outputs` (committed by the caller), else committed when the
    plan is done; `progress` (else the reporter in effect) is told each device, rung and
    trace."""
    check_argument("run_plan", "options", options, PlanOptions, "run_plan(PlanOptions(model=...))")
    if outputs is None:
        with staged_directories() as staged:
            return run_plan(options, progress=progress, outputs=staged)
    problems = option_problems(options)
    if problems:
        raise SpecError(problems)
    with reporting(progress), live_fields(_model_fields(options), options.sample) as fields:
        fields.pop("batch", None)  # NB: a live model's rows: the plan chooses the micro-batch
        result = _run_plan(options, fields, outputs)
        return dataclasses.replace(result, live=registration_of(fields["model"]))


def _model_fields(options: PlanOptions) -> dict[str, Any]:
    """The TrainSpec fields of the model planned and its step: its name or live module, its
    inputs, loss and step function (see `trainfit.models.live.live_fields`)."""
    fields = dict(
        model=options.model,
        seq_len=options.seq,
        multiplier=options.multiplier,
        loss=options.loss,
        step_fn=options.step_fn,
        task=options.task,
    )
    if options.input:
        fields["inputs"] = options.input
    return fields


def _run_plan(
    options: PlanOptions, fields: Mapping[str, Any], outputs: StagedDirectories
) -> PlanResult:
    devices = options.device or DEFAULT_DEVICES
    if options.inference and options.effective_batch is None:  # NB: serving only
        return _serve_only(options, fields, devices)
    if options.effective_batch is None:  # NB: a spec file may give it
        raise SpecError(["trainfit plan needs --effective-batch N (or --inference)"])
    _check_outputs(options)
    spec = TrainSpec(
        **fields,
        optimizer=options.optimizer,
        optimizer_path=options.optimizer_path,
        freeze=options.freeze,
        preference=options.preference,
        reference=options.reference,
        weights_dtype=options.weights_dtype,
        reference_dtype=options.reference_dtype,
        device=devices[0],
        lora=lora_fields(
            options.lora,
            options.lora_alpha,
            options.lora_dropout,
            options.lora_targets,
            options.qlora,
        ),
    )
    run = run_spec(options)
    check_sized(run, options)
    if options.report:
        from trainfit.export.write import check_directory

        check_directory(options.report, "report directory")
    precision = _precision(options)
    multi = _multi_gpu(options)
    if options.stage:
        planned: Plan | StagedPlan = _staged(options, spec, devices, run, precision)
        plans = [stage.plan for stage in planned.stages]
        subdirectories = [f"stage{number}" for number in range(1, len(plans) + 1)]
    else:
        planned = _plan(options, spec, devices, run, precision, multi)
        plans, subdirectories = [planned], [""]
    files = tuple(
        _write_files(options, p, s, outputs) for p, s in zip(plans, subdirectories, strict=True)
    )
    serving_spec = TrainSpec(**fields) if options.inference else None
    return PlanResult(
        options=options,
        plan=planned,
        serving_spec=serving_spec,
        serving=_serving(options, serving_spec, devices) if serving_spec else (),
        files=files,
    )


def option_problems(options: PlanOptions) -> list[str]:
    """What `run_plan` would refuse in `options` only once planning (the engine, offload,
    stages, outputs, LoRA, calibration, inference precisions) and a model, loss or step
    function that cannot be found, each a line; none of it plans or builds the model."""
    checks: list[Callable[[], object]] = [
        lambda: _check_outputs(options),
        lambda: options.report and check_writable_directory(options.report, "report directory"),
        lambda: _multi_gpu(options),
        lambda: stages(options.stage, TrainSpec(model="x.y:z", freeze=options.freeze)),
        lambda: measured(options.measured_step, options.measured_on, "h100"),
        lambda: lora_fields(
            options.lora,
            options.lora_alpha,
            options.lora_dropout,
            options.lora_targets,
            options.qlora,
        ),
        lambda: options.inference and _inference_precisions(options),
        lambda: _inference_only(options),
    ]
    problems = []
    for check in checks:
        try:
            check()
        except SpecError as exc:
            problems += exc.problems
        except TrainfitError as exc:
            problems.append(str(exc))
    if not isinstance(options.model, str):  # NB: a live model: checked by PlanOptions
        return problems
    model = model_problems(
        options.model, options.loss, options.step_fn, bool(options.input), options.task
    )
    return problems + model


def _inference_only(options: PlanOptions) -> None:
    """The options of generation, given without --inference, which would be ignored."""
    given = [
        flag
        for flag, value in (
            ("--context", options.context is not None),
            ("--new-tokens", options.new_tokens is not None),
            ("--inference-precision", options.inference_precision != "bf16"),
            ("--infer-batch", bool(options.infer_batch)),
        )
        if value
    ]
    if given and not options.inference:
        raise SpecError(
            [f"{', '.join(given)} only apply with --inference: add --inference, or drop them"]
        )


def _check_outputs(options: PlanOptions) -> None:
    """Before planning (which takes seconds): the export formats' packages, and the
    directories can be written."""
    if options.export_dir is not None and not options.export:
        raise SpecError(["--export-dir needs --export (hf, lightning, accelerate or yaml)"])
    from trainfit.export.formats import require_packages
    from trainfit.export.write import check_directory

    if options.export:
        require_packages(options.export)
        check_directory(options.export_dir or ".")
    if options.config_dir:
        check_directory(options.config_dir, "config directory")


def _plan(
    options: PlanOptions,
    spec: TrainSpec,
    devices: tuple[str, ...],
    run: RunSpec,
    precision: Precision | None,
    multi: dict[str, Any],
) -> Plan:
    from trainfit.plan.search import plan

    return plan(
        spec,
        options.effective_batch or 0,
        devices,
        margin=options.margin,
        precision=precision,
        jobs=options.jobs,
        run=run,
        measured_step=measured(options.measured_step, options.measured_on, devices[0]),
        **multi,
    )


def _precision(options: PlanOptions) -> Precision | None:
    from trainfit.spec import parse_enum

    if not options.precision:
        return None
    return parse_enum(Precision, "precision", options.precision)


def _multi_gpu(options: PlanOptions) -> dict[str, Any]:
    """plan()'s multi-GPU arguments from strategy, offload, gpus and nodes."""
    from trainfit.distributed.strategy import Offload, Strategy, check_offload
    from trainfit.spec import parse_enum

    strategy = offload = None
    asked = any(v is not None for v in (options.strategy, options.offload, options.nodes))
    problems = []
    try:
        if options.strategy not in (None, "auto"):
            strategy = parse_enum(Strategy, "strategy", options.strategy)
    except TrainfitError as exc:
        problems.append(str(exc))
    try:
        if options.offload is not None:
            offload = parse_enum(Offload, "offload", options.offload)
    except TrainfitError as exc:
        problems.append(str(exc))
    if problems:
        raise SpecError(problems)
    if strategy is not None and offload is not None:
        check_offload(strategy, offload)  # NB: before planning, which takes seconds
    # NB: one GPU is the default: the GPU count is then searched
    gpus = options.gpus if options.gpus != 1 else None
    if not asked and gpus is None:
        return {}
    return dict(strategy=strategy, offload=offload, gpus=gpus, nodes=options.nodes, multi_gpu=True)


def _staged(
    options: PlanOptions,
    spec: TrainSpec,
    devices: tuple[str, ...],
    run: RunSpec,
    precision: Precision | None,
) -> StagedPlan:
    """Every stage planned."""
    from trainfit.plan.stages import plan_stages

    items = stages(options.stage, spec)
    return plan_stages(
        spec,
        items,
        options.effective_batch or 0,
        devices,
        margin=options.margin,
        precision=precision,
        jobs=options.jobs,
        run=run,
        measured_step=measured(options.measured_step, options.measured_on, devices[0]),
    )


def _write_files(
    options: PlanOptions, plan: Plan, subdirectory: str, outputs: StagedDirectories
) -> FilesWritten:
    """`config_dir` and `export` files of one plan, under `subdirectory` of each (into the
    staged directories; the paths returned are where they will be)."""
    configs: list[Path] = []
    if options.config_dir:
        from trainfit.export.configs import write_configs

        written = write_configs(plan, outputs.path(options.config_dir) / subdirectory)
        configs = [outputs.final(path) for path in written]
    exported = None
    if options.export:
        from trainfit.export.write import write_exports

        where = outputs.path(options.export_dir or ".") / subdirectory
        exported = write_exports(plan, options.export, where)
        exported = dataclasses.replace(
            exported, written=tuple(outputs.final(path) for path in exported.written)
        )
    return FilesWritten(configs=tuple(configs), exported=exported)


def _inference_precisions(options: PlanOptions) -> list[InferencePrecision]:
    from trainfit.spec import parse_enum

    return [
        parse_enum(InferencePrecision, "inference precision", p)
        for p in options.inference_precision.split(",")
        if p.strip()
    ]


def _serving(
    options: PlanOptions, spec: TrainSpec, devices: tuple[str, ...]
) -> tuple[ServingResult, ...]:
    """Generation for a causal LM, one forward for any other model, per device, precision
    and batch (what trainfit does not estimate is a refusal saying why)."""
    from trainfit.estimator.forward import estimate_serving

    return tuple(
        estimate_serving(
            spec,
            devices=devices,
            precisions=_inference_precisions(options),
            batches=options.infer_batch or [1],
            context=options.context,
            new_tokens=options.new_tokens,
        )
    )


def _serve_only(
    options: PlanOptions, fields: Mapping[str, Any], devices: tuple[str, ...]
) -> PlanResult:
    """Serving only (no effective batch): every (device, precision, batch) estimate."""
    from trainfit.estimator.forward import is_generative
    from trainfit.estimator.generation import estimate_inference_table

    if options.report:
        from trainfit.export.write import check_directory

        check_directory(options.report, "report directory")
    # NB: the model as served: no LoRA, preference pair or frozen layers of the training spec
    spec = TrainSpec(**fields)
    if not is_generative(spec):
        serving = _serving(options, spec, devices)
        return PlanResult(options=options, serving_spec=spec, serving=serving)
    problems = []
    if options.context is None:
        problems.append("--inference needs --context N (prompt tokens)")
    if options.new_tokens is None:
        problems.append("--inference needs --new-tokens N (tokens generated per sequence)")
    if options.context is None or options.new_tokens is None:
        raise SpecError(problems)
    generation = estimate_inference_table(
        spec.model,
        context=options.context,
        new_tokens=options.new_tokens,
        batches=options.infer_batch or [1],
        precisions=_inference_precisions(options),
        devices=devices,
    )
    return PlanResult(options=options, serving_spec=spec, generation=tuple(generation))
