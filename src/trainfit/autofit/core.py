"""`autofit()`: settings for a plain PyTorch loop, chosen from the estimate of the live model.

The live model is registered as a meta copy (`trainfit.models.live`) and planned like any
other spec (`trainfit.plan.plan`, one device, no ladder): the precision the device supports,
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

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from trainfit.autofit.apply import (
    apply_checkpointing,
    apply_freeze,
    apply_numerics,
    check_freeze,
    has_bitsandbytes,
    optimizer_kind,
)
from trainfit.autofit.fit import Fit, Request
from trainfit.errors import MeasureError, SpecError, TraceError, UnknownNameError
from trainfit.estimate import estimate
from trainfit.hardware.catalog import get_device
from trainfit.measure.backend import Backend, backend_for
from trainfit.measure.compare import local_catalog_device
from trainfit.models.live import UserBatch, register_model
from trainfit.plan import DEFAULT_MARGIN, DevicePlan, plan
from trainfit.spec import OptimizerKind, Precision, TrainSpec, parse_enum

GIB = 2**30


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
    freeze: Sequence[str] | None = None,
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
    - `checkpoint_modules`: glob of the modules to checkpoint (default: the blocks of the largest
      `nn.ModuleList`; transformers' own checkpointing on its models).
    - `freeze`: glob patterns of parameter names to freeze, every other parameter trains; None
      keeps the model's `requires_grad` as it is.
    - `micro_batch`: force the micro-batch (checked against the estimate).
    - `confirm`: run one real optimizer step on the model itself, then restore its weights.
    - `apply`: freeze, checkpoint, cast and move the model (False: leave it untouched).
    """
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
        freeze=None if freeze is None else tuple(freeze),
        micro_batch=micro_batch,
        margin=margin,
        confirm=confirm,
        apply=apply,
    )
    kind, chosen_precision = _validate(request)
    if freeze is not None:
        check_freeze(model, freeze)
    catalog, run_on, backend = _target(device)
    live = register_model(model, sample, loss_fn, step_fn, trainable_all=freeze is not None)
    spec = TrainSpec(
        model=live.model_path,
        step_fn=live.step_path,
        inputs=live.inputs,
        device=catalog,
        optimizer=kind,
        checkpointing=bool(checkpointing),
        checkpoint_modules=checkpoint_modules if checkpointing else None,
        freeze=tuple(freeze or ()),
    )
    failure: TraceError | SpecError | None = None
    try:
        with _quiet_tracer():
            found = _plan(request, spec, catalog, chosen_precision)
            setting = _check_setting(request, found, kind)
            micro = micro_batch or setting.micro_batch
            chosen = dataclasses.replace(
                spec,
                batch=micro,
                grad_accum=effective_batch // micro,
                precision=setting.precision,
                checkpointing=setting.checkpointing,
                checkpoint_modules=checkpoint_modules if setting.checkpointing else None,
                optimizer=setting.optimizer,
            )
            predicted = estimate(chosen)
    except TraceError as exc:
        failure = exc
    except SpecError as exc:
        if "--checkpoint-modules" not in str(exc):
            raise
        # NB: the trace words it for the command line
        failure = SpecError([str(exc).replace("--checkpoint-modules GLOB", "checkpoint_modules=")])
    if isinstance(failure, SpecError):
        raise failure
    if failure is not None:
        text = str(failure)
        name = type(model).__name__
        if text.startswith("op ") or text.startswith("the training step failed"):
            text = f"the training step of {name} fails on the sample batch: {text}"
        elif not text.startswith("the training step of"):
            text = f"autofit could not estimate {name} on the sample batch: {text}"
        raise TraceError(text)
    checkpointed: tuple[str, ...] = ()
    if apply:
        if freeze is not None:
            apply_freeze(model, freeze)
        checkpointed = apply_checkpointing(model, chosen)
        apply_numerics(model, chosen.precision, run_on if backend is not None else None)
    fit = Fit(
        micro_batch=micro,
        grad_accum=chosen.grad_accum,
        effective_batch=effective_batch,
        precision=chosen.precision,
        checkpointing=chosen.checkpointing,
        checkpointed=checkpointed,
        optimizer_kind=chosen.optimizer,
        device=run_on,
        catalog_device=catalog,
        local=backend is not None,
        predicted_bytes=predicted.device_memory_needed_bytes,
        device_memory_bytes=predicted.device.memory_bytes,
        margin=margin,
        max_micro_batch=found.max_micro_batch,
        trainable_parameters=predicted.trainable_parameter_count,
        parameters=predicted.parameter_count,
        scaler=(
            # NB: disabled (a pass-through) where the fit is for another machine's device
            torch.amp.GradScaler(run_on.type, enabled=backend is not None)
            if chosen.precision is Precision.FP16
            else None
        ),
        spec=chosen,
        estimate=predicted,
        changes=found.changes,
        request=request,
    )
    if confirm:
        from trainfit.autofit.confirm import confirm_step

        if backend is None or not apply:
            raise SpecError(
                [
                    f"confirm runs one step on this machine's device, but the fit is for "
                    f"{catalog}{'' if apply else ' and apply=False left the model untouched'}: "
                    "drop confirm, or fit for this machine (device=None) with apply=True"
                ]
            )
        fit = dataclasses.replace(fit, confirmed=confirm_step(fit, backend))
    return fit


def _validate(request: Request) -> tuple[OptimizerKind, Precision | None]:
    """The optimizer kind and precision asked for; SpecError listing every problem."""
    problems: list[str] = []
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
    if not 0.0 <= request.margin < 1.0:
        problems.append(f"margin must be a fraction in [0, 1), got {request.margin}")
    kind = OptimizerKind.ADAMW
    try:
        kind = optimizer_kind(request.optimizer)
    except (SpecError, UnknownNameError) as exc:
        problems.append(str(exc))
    if kind is OptimizerKind.ADAMW_8BIT and not has_bitsandbytes():
        problems.append("optimizer adamw-8bit needs bitsandbytes: pip install bitsandbytes")
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
    backend when the two are this machine's (None: estimate only)."""
    if device is None or device.split(":")[0] in ("cuda", "mps"):
        backend = backend_for(device)
        try:
            name = local_catalog_device(backend)
        except MeasureError as exc:
            # NB: worded for the command line
            raise MeasureError(str(exc).replace("pass --device", "pass device=")) from None
        return name, backend.device, backend
    row = get_device(device)
    backend = backend_for("cpu" if row.kind == "cpu" else None)
    if row.kind == backend.kind:
        return row.name, backend.device, backend
    return row.name, torch.device(row.kind if row.kind in ("cuda", "mps") else "cpu"), None


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
        raise SpecError([f"{name} does not fit {found.display}: {found.note}"])
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
        if isinstance(request.optimizer, torch.optim.Optimizer) or not has_bitsandbytes():
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


@contextlib.contextmanager
def _quiet_tracer() -> Iterator[None]:
    """Silence the tracebacks FakeTensorMode logs for an op that fails: the failure is raised
    as one TraceError line."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
