"""`autofit()`: settings for a plain PyTorch loop, chosen from the estimate of the live model.

The live model is registered as a meta copy (`trainfit.models.live`) and planned like any
other spec (`trainfit.plan.search.plan`, one device, no ladder): the precision the device supports,
then gradient checkpointing, then 8-bit AdamW state (only with bitsandbytes installed and an
optimizer autofit makes), on the first that fits one sample the largest micro-batch inside the
margin that divides the effective batch. The chosen step is then estimated once more as it will
run (with its accumulation), applied to the model and optionally run once for real.

Known limitations: the effective batch is kept exactly (an effective batch that only splits
into micro-batches under half of what fits is an error naming the nearest that split); one
device (no data parallel); the estimate is of the sample batch's shapes (variable-length
batches should give their longest sample); the CPU is planned in fp32 only.
"""

from __future__ import annotations

import dataclasses
import itertools
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from trainfit.autofitter.apply import (
    apply_checkpointing,
    apply_freeze,
    apply_numerics,
    check_freeze,
    remove_checkpointing,
    spec_freeze,
)
from trainfit.autofitter.fit import Fit, Request
from trainfit.errors import MeasureError, SpecError, TraceError, UnknownNameError
from trainfit.estimator.step import Estimate, estimate
from trainfit.hardware.catalog import DeviceKind, get_device
from trainfit.measure.backend import Backend, backend_for
from trainfit.measure.compare import local_catalog_device
from trainfit.models.live import LiveModel, UserBatch, registered
from trainfit.models.program import hf_checkpointing, hf_checkpointing_enable
from trainfit.optim import optimizer_entry, optimizer_kind
from trainfit.plan.options import DEFAULT_MARGIN, DevicePlan
from trainfit.plan.search import plan
from trainfit.plan.words import note_text
from trainfit.spec import OptimizerKind, Precision, TrainSpec, parse_enum


def autofit(
    model: nn.Module,
    sample: UserBatch,
    effective_batch: int,
    *,
    optimizer: torch.optim.Optimizer | str | OptimizerKind = OptimizerKind.ADAMW,
    loss_fn: Callable[..., torch.Tensor] | None = None,
    step_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
    device: str | None = None,
    precision: Precision | str | None = None,
    checkpointing: bool | None = None,
    checkpoint_modules: str | None = None,
    freeze: str | Sequence[str] | None = None,
    micro_batch: int | None = None,
    margin: float = DEFAULT_MARGIN,
    confirm: bool = False,
    apply: bool = True,
) -> Fit:
    """Choose the micro-batch, accumulation, precision, checkpointing and optimizer state of a
    plain training loop of `model` that fit the device, apply them, and return the `Fit`.

    - `sample`: one batch as the loop feeds it (a tensor, a tuple `(inputs..., target)` or a
      dict of tensors; batch dimension first); any number of rows, its shapes are the step's.
    - `effective_batch`: samples per optimizer step, kept exactly.
    - `optimizer`: the loop's optimizer, or its name (then 8-bit AdamW may be chosen where
      bitsandbytes is installed, and `fit.make_optimizer()` makes it).
    - `loss_fn(output, target)` / `step_fn(model, batch) -> loss`: see
      `trainfit.models.live.register_model`; neither: the output's `.loss` or trainfit's default.
    - `device`: a catalog name (`trainfit devices`) or "cuda"/"cuda:N"/"mps"/"cpu"; None: this
      machine's device. A catalog device of another kind than this machine's is estimated only.
    - `precision`, `checkpointing`: None lets the plan choose; a value forces it.
    - `checkpoint_modules`: glob of the modules to checkpoint (default: the blocks of every
      `nn.ModuleList` not inside another; transformers' own checkpointing on its models).
    - `freeze`: glob patterns of parameter names to freeze, every other parameter trains; None
      keeps the model's `requires_grad` as it is.
    - `micro_batch`: force the micro-batch (checked against the estimate).
    - `confirm`: run one real optimizer step on the model itself, then restore its weights.
    - `apply`: freeze, checkpoint, cast and move the model (False: leave it untouched).
    """
    if isinstance(freeze, str):
        freeze = (freeze,)  # NB: one pattern, not its characters
    request = Request(
        model=model,
        sample=sample,
        effective_batch=effective_batch,
        optimizer=optimizer,
        loss_fn=loss_fn,
        step_fn=step_fn,
        device=device,
        precision=precision,
        checkpointing=checkpointing,
        checkpoint_modules=checkpoint_modules,
        freeze=None if freeze is None or not _is_sequence(freeze) else tuple(freeze),
        micro_batch=micro_batch,
        margin=margin,
        confirm=confirm,
        apply=apply,
    )
    # NB: everything is checked before anything is done to the model
    kind, chosen_precision = _validate(request, freeze)
    catalog, run_on, backend = _target(device)
    _check_precision(chosen_precision, catalog)
    if confirm and (backend is None or not apply):
        raise SpecError(
            [
                "confirm runs one step on this machine's device, but "
                + (
                    f"the fit is for {catalog} (not this machine's device)"
                    if backend is None
                    else "apply=False leaves the model untouched"
                )
                + ": drop confirm, or fit for this machine (device=None) with apply=True"
            ]
        )
    if request.freeze is not None:
        check_freeze(model, request.freeze)
    chosen = _choose(request, kind, chosen_precision, catalog)
    return _apply(request, chosen, catalog, run_on, backend)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class _Chosen:
    """The planned setting as the step will run, and its estimate."""

    live: LiveModel
    """The model's registration as a meta copy (forgotten when the fit fails)."""
    found: DevicePlan
    spec: TrainSpec
    """The chosen step: micro-batch, accumulation, precision, checkpointing, optimizer."""
    predicted: Estimate


def _choose(
    request: Request, kind: OptimizerKind, precision: Precision | None, catalog: str
) -> _Chosen:
    """Plan the live model on `catalog` and estimate the chosen step; the errors of tracing
    the user's model in the words of their Python."""
    try:
        return _plan_and_estimate(request, kind, precision, catalog)
    except TraceError as exc:
        text = _python_words(str(exc))
        name = type(request.model).__name__
        if text.startswith("op ") or text.startswith("the training step failed"):
            text = f"the training step of {name} fails on the sample batch: {text}"
        elif not text.startswith("the training step of"):
            text = f"autofit could not estimate {name} on the sample batch: {text}"
        raise TraceError(text) from None
    except SpecError as exc:
        raise SpecError([_python_words(p) for p in exc.problems]) from None
    except MeasureError as exc:
        raise MeasureError(_python_words(str(exc))) from None


def _plan_and_estimate(
    request: Request, kind: OptimizerKind, precision: Precision | None, catalog: str
) -> _Chosen:
    """The live model registered, planned on `catalog` and its chosen step estimated."""
    model, freeze, modules = request.model, request.freeze, request.checkpoint_modules
    with registered(
        model,
        request.sample,
        request.loss_fn,
        request.step_fn,
        trainable_all=freeze is not None,
    ) as live:
        spec = TrainSpec(
            model=live.model_path,
            step_fn=live.step_path,
            inputs=live.inputs,
            device=catalog,
            optimizer=kind,
            checkpointing=bool(request.checkpointing),
            checkpoint_modules=modules if request.checkpointing else None,
            freeze=spec_freeze(model, freeze or ()),
        )
        found = _plan(request, spec, catalog, precision)
        setting = _check_setting(request, found, kind)
        micro = request.micro_batch or setting.micro_batch
        chosen = dataclasses.replace(
            spec,
            batch=micro,
            grad_accum=request.effective_batch // micro,
            precision=setting.precision,
            checkpointing=setting.checkpointing,
            checkpoint_modules=modules if setting.checkpointing else None,
            optimizer=setting.optimizer,
        )
        predicted = estimate(chosen)
    return _Chosen(live=live, found=found, spec=chosen, predicted=predicted)


def _apply(
    request: Request,
    chosen: _Chosen,
    catalog: str,
    run_on: torch.device,
    backend: Backend | None,
) -> Fit:
    """Apply the chosen step to the model (unless `request.apply` is off) and make the `Fit`,
    confirmed by one real step when asked; a failure puts the model back as it was given."""
    model, spec, predicted = request.model, chosen.spec, chosen.predicted
    checkpointed: tuple[str, ...] = ()
    undo = _Undo(model) if request.apply else None
    try:
        if request.apply:
            if request.freeze is not None:
                apply_freeze(model, request.freeze)
            checkpointed = apply_checkpointing(model, spec)
            apply_numerics(model, spec.precision, run_on if backend is not None else None)
        fit = Fit(
            micro_batch=spec.batch,
            grad_accum=spec.grad_accum,
            effective_batch=request.effective_batch,
            precision=spec.precision,
            checkpointing=spec.checkpointing,
            checkpointed=checkpointed,
            optimizer_kind=spec.optimizer,
            device=run_on,
            catalog_device=catalog,
            local=backend is not None,
            predicted_bytes=predicted.device_memory_needed_bytes,
            device_memory_bytes=predicted.device.memory_bytes,
            margin=request.margin,
            max_micro_batch=chosen.found.max_micro_batch,
            trainable_parameters=predicted.trainable_parameter_count,
            parameters=predicted.parameter_count,
            scaler=(
                # NB: disabled (a pass-through) where the fit is for another machine's device
                torch.amp.GradScaler(run_on.type, enabled=backend is not None)
                if spec.precision is Precision.FP16
                else None
            ),
            spec=spec,
            estimate=predicted,
            changes=chosen.found.changes,
            request=request,
            planner=autofit,
            live=chosen.live.registration,
        )
        if request.confirm:
            from trainfit.autofitter.confirm import confirm_step

            assert backend is not None
            fit = dataclasses.replace(fit, confirmed=confirm_step(fit, backend))
    except BaseException:
        # NB: a failed fit leaves the model as it was given (requires_grad, checkpointing,
        # dtype and device of each tensor, config.use_cache, the TF32 switch)
        chosen.live.registration.forget()
        if undo is not None:
            undo.restore()
        raise
    return fit


class _Undo:
    """What applying a fit changes on the model, taken before, to put back on a failure."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.requires_grad = [(p, p.requires_grad) for p in model.parameters()]
        self.forwards = [(m, vars(m).get("forward")) for m in model.modules()]
        self.hf_checkpointing = hf_checkpointing(model)
        self.placement = [
            (t, t.device, t.dtype) for t in itertools.chain(model.parameters(), model.buffers())
        ]
        config = getattr(model, "config", None)
        self.use_cache = getattr(config, "use_cache", None)
        self.tf32 = torch.backends.cuda.matmul.allow_tf32

    def restore(self) -> None:
        model = self.model
        for p, flag in self.requires_grad:
            p.requires_grad_(flag)
        remove_checkpointing(model)
        for m, forward in self.forwards:
            if forward is not None:
                m.forward = forward
        if self.hf_checkpointing:
            hf_checkpointing_enable(model, {"use_reentrant": False})
        with torch.no_grad():
            for t, device, dtype in self.placement:
                if t.device != device or t.dtype != dtype:
                    t.data = t.data.to(device=device, dtype=dtype)
                grad = t.grad
                if grad is not None and (grad.device != device or grad.dtype != dtype):
                    t.grad = grad.to(device=device, dtype=dtype)
        if self.use_cache is not None:
            model.config.use_cache = self.use_cache
        torch.backends.cuda.matmul.allow_tf32 = self.tf32


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple, set, frozenset)) or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    )


_CLI_WORDS = (
    ("--checkpoint-modules GLOB", "checkpoint_modules="),
    ("--checkpoint-modules ", "checkpoint_modules="),
    ("pass --on cpu", 'pass device="cpu"'),
    ("--on cpu", 'device="cpu"'),
    ("pass --device with", "pass device= with"),
    ("with --device", "with device="),
    ("(--device)", "(device=)"),
    ("--device", "device="),
    ("a user catalog (--catalog)", "a user catalog (trainfit.hardware.catalog.using_catalogs)"),
    ("--precision ", "precision="),
    ("--margin", "margin="),
)


def _python_words(text: str) -> str:
    """An error worded for the command line, reworded for autofit's keyword arguments."""
    for cli, python in _CLI_WORDS:
        text = text.replace(cli, python)
    return text


def _validate(request: Request, freeze: Any) -> tuple[OptimizerKind, Precision | None]:
    """The optimizer kind and precision asked for; SpecError listing every problem."""
    problems: list[str] = []
    margin = request.margin
    if not isinstance(margin, numbers.Real) or isinstance(margin, bool):
        problems.append(f"margin must be a number in [0, 1), got {margin!r}")
    elif not 0.0 <= margin < 1.0:
        problems.append(f"margin must be a fraction in [0, 1), got {margin}")
    if freeze is not None and (
        not _is_sequence(freeze) or not all(isinstance(p, str) for p in freeze)
    ):
        problems.append(
            f"freeze must be a glob pattern or a list of them (strings), got {freeze!r}"
        )
    for name, value in (("checkpointing", request.checkpointing),):
        if value is not None and not isinstance(value, bool):
            problems.append(f"{name} must be None, True or False, got {value!r}")
    for name, value in (("confirm", request.confirm), ("apply", request.apply)):
        if not isinstance(value, bool):
            problems.append(f"{name} must be True or False, got {value!r}")
    for name, value in (
        ("checkpoint_modules", request.checkpoint_modules),
        ("device", request.device),
    ):
        if value is not None and not isinstance(value, str):
            problems.append(f"{name} must be a string, got {value!r}")
    if request.loss_fn is not None and not callable(request.loss_fn):
        problems.append(f"loss_fn must be callable, got {request.loss_fn!r}")
    if request.step_fn is not None and not callable(request.step_fn):
        problems.append(f"step_fn must be callable, got {request.step_fn!r}")
    if not isinstance(request.model, nn.Module):
        problems.append(f"model is a {type(request.model).__name__}, not a torch.nn.Module")
    effective, micro = request.effective_batch, request.micro_batch
    for name, value in (("effective_batch", effective), ("micro_batch", micro)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            problems.append(f"{name} must be a positive integer, got {value!r}")
    if not problems and micro is not None and effective % micro:
        problems.append(_not_divisible(effective, micro))
    if request.checkpointing is False and request.checkpoint_modules:
        problems.append("checkpoint_modules is set but checkpointing=False: drop one")
    kind = OptimizerKind.ADAMW
    try:
        kind = optimizer_kind(request.optimizer)
    except (SpecError, UnknownNameError) as exc:
        problems.append(str(exc))
    if not (entry := optimizer_entry(kind)).installed():
        package = entry.package
        problems.append(f"optimizer {kind.value} needs {package}: pip install {package}")
    precision = None
    if request.precision is not None:
        try:
            precision = parse_enum(Precision, "precision", request.precision)
        except UnknownNameError as exc:
            problems.append(str(exc))
    if problems:
        raise SpecError(problems)
    return kind, precision  # type: ignore[return-value]


def _not_divisible(effective: int, micro: int) -> str:
    below, above = effective // micro * micro, (effective // micro + 1) * micro
    nearest = [f"{n} ({micro} x {n // micro})" for n in (below, above) if n]
    return (
        f"effective batch {effective} is not a multiple of micro-batch {micro} "
        f"({micro} x {effective // micro} = {below}, {effective % micro} left over): the "
        f"nearest that work are {' or '.join(nearest)}"
    )


def _target(device: str | None) -> tuple[str, torch.device, Backend | None]:
    """The catalog device to plan for, the torch device the loop runs on, and the local
    backend when the two are this machine's (None: estimate only).

    A catalog name is this machine's device only when it is the catalog row of the local
    card (`local_catalog_device`): another card of the same kind is planned for, not used."""
    if device is None or device.split(":")[0] in ("cuda", "mps"):
        try:
            backend = backend_for(device)
            name = local_catalog_device(backend)
        except MeasureError as exc:
            raise MeasureError(_python_words(str(exc))) from None
        return name, backend.device, backend
    row = get_device(device)
    try:
        backend = backend_for("cpu" if row.kind is DeviceKind.CPU else None)
        local = local_catalog_device(backend)
    except MeasureError:
        local = None  # NB: no local card of the catalog: the fit is an estimate only
    if local == row.name:
        return row.name, backend.device, backend
    return (
        row.name,
        torch.device(row.kind.value if row.kind in (DeviceKind.CUDA, DeviceKind.MPS) else "cpu"),
        None,
    )


def _check_precision(precision: Precision | None, catalog: str) -> None:
    """SpecError when a forced precision cannot run on the catalog device (naming those that
    can), instead of the plan silently choosing another."""
    if precision is None:
        return
    row = get_device(catalog)
    if row.kind is DeviceKind.CPU:
        runs = [Precision.FP32]
        why = "the CPU is planned in fp32 only"
    elif row.kind is DeviceKind.MPS:
        runs = [p for p in Precision if p is not Precision.TF32]
        why = "tf32 is a CUDA setting"
    elif not row.has_bf16:
        runs = [Precision.FP32, Precision.FP16]
        why = "no bf16 or tf32 before compute capability 8.0"
    else:
        return
    if precision not in runs:
        raise SpecError(
            [
                f"precision={precision.value!r} cannot run on {catalog} ({why}): it supports "
                f"{', '.join(repr(p.value) for p in runs)}, or leave precision=None"
            ]
        )


def _plan(
    request: Request, spec: TrainSpec, catalog: str, precision: Precision | None
) -> DevicePlan:
    """The plan of `spec` on `catalog`; named blocks are planned when checkpointing is chosen."""

    def one(spec: TrainSpec) -> DevicePlan:
        result = plan(
            spec,
            effective_batch=request.effective_batch,
            devices=(catalog,),
            margin=request.margin,
            precision=precision,
            ladder=False,
        )
        return result.devices[0]

    found = one(spec)
    pattern = request.checkpoint_modules
    if (
        pattern
        and not spec.checkpointing
        and (found.setting is None or found.setting.checkpointing)
    ):
        # NB: the plan's checkpointing rung takes the default blocks; the named ones instead
        found = one(dataclasses.replace(spec, checkpointing=True, checkpoint_modules=pattern))
    return found


def _check_setting(request: Request, found: DevicePlan, kind: OptimizerKind) -> Any:
    """The plan's setting when the loop can use it as asked; else SpecError saying why not."""
    name = type(request.model).__name__
    setting = found.setting
    if setting is None:
        raise SpecError([f"{name} does not fit {found.display}: {note_text(found)}"])
    if request.checkpointing is False and setting.checkpointing:
        raise SpecError(
            [
                f"{name} does not fit {found.display} without gradient checkpointing (not one "
                "sample fits inside the margin): allow it with checkpointing=None"
            ]
        )
    if setting.optimizer is OptimizerKind.ADAMW_8BIT and kind is not OptimizerKind.ADAMW_8BIT:
        if isinstance(request.optimizer, torch.optim.Optimizer):
            how = (
                "pass the optimizer's name (optimizer='adamw') so that fit.make_optimizer() "
                "makes bitsandbytes' AdamW8bit"
            )
        else:
            how = "install bitsandbytes (pip install bitsandbytes)"
        installed = optimizer_entry(setting.optimizer).installed()
        if isinstance(request.optimizer, torch.optim.Optimizer) or not installed:
            raise SpecError([f"{name} fits {found.display} only with 8-bit AdamW state: {how}"])
    effective, micro = request.effective_batch, request.micro_batch
    if micro is not None:
        if micro > found.max_micro_batch:
            raise SpecError(
                [
                    f"micro-batch {micro} does not fit {found.display}: the largest that fits "
                    f"({setting.precision.value}, "
                    f"{'' if setting.checkpointing else 'no '}checkpointing) is "
                    f"{found.max_micro_batch}"
                ]
            )
        return setting
    if setting.micro_batch * setting.grad_accum != effective:
        largest = min(found.max_micro_batch, effective)
        divisor = max(d for d in range(1, largest + 1) if effective % d == 0)
        accum = setting.grad_accum
        below = effective // accum * accum
        above = setting.micro_batch * accum
        nearest = [f"{n} ({n // accum} x {accum})" for n in (below, above) if n and n != effective]
        raise SpecError(
            [
                f"effective batch {effective} does not split into micro-batches that fill "
                f"{found.display}: the largest micro-batch that fits is {largest} and "
                f"{effective}'s largest divisor up to it is {divisor}; the nearest effective "
                f"batches that split are {' or '.join(nearest)} (or pass micro_batch={divisor})"
            ]
        )
    return setting
