"""One real optimizer step of a fit, on the user's own model, undone afterwards.

The step runs on the model itself (a copy would double the weights' memory and so measure
another job): `min(grad_accum, 2)` micro-batches of the sample (its rows repeated or cut to
the micro-batch) under the fit's autocast and a fresh GradScaler, then a step of a *fresh*
optimizer of the chosen kind (the loop's own optimizer is never touched). Afterwards the
trainable parameters and the buffers are copied back from a host copy taken before, the
gradients, the RNG states and each module's train/eval mode restored, and the optimizer dropped.

Known limitations: the host copy of the trainable weights and buffers costs host RAM the size
of them during the step; a model that keeps other state (a step counter in a Python attribute)
is not restored; the CPU has no allocator counter, so there is no predicted/measured ratio.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import torch

from trainfit.autofitter.fit import Confirmed, Fit
from trainfit.errors import MeasureError
from trainfit.hardware.catalog import DeviceKind
from trainfit.hardware.units import GIB
from trainfit.measure.backend import Backend, is_out_of_memory
from trainfit.models.live import UserBatch, forward_failure, rebuild_sequence, run_step


def confirm_step(fit: Fit, backend: Backend) -> Confirmed:
    """Run one optimizer step of `fit` on its model and restore the model (module docstring)."""
    request = fit.request
    model = request.model
    trainable = [p for p in model.parameters() if p.requires_grad]
    saved = [p.detach().to("cpu", copy=True) for p in trainable]
    buffers = [(b, b.detach().to("cpu", copy=True)) for b in model.buffers()]
    grads = [(p, p.grad) for p in model.parameters()]
    rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if backend.kind == DeviceKind.CUDA else None
    training = {m: m.training for m in model.modules()}
    for p, _ in grads:
        p.grad = None
    batch = _rows_of(request.sample, fit.micro_batch)
    failure: BaseException | None = None
    message = ""
    loss_value = float("nan")
    seconds = 0.0
    peaks: tuple[int | None, int | None, int | None] = (None, None, None)
    optimizer = fit.make_optimizer()
    scaler = torch.amp.GradScaler(fit.device.type) if fit.scaler is not None else None
    backend.start()
    try:
        model.train()
        started = time.perf_counter()
        for index in range(min(fit.grad_accum, 2)):
            for micro in (fit._move(batch),):
                with fit.autocast():
                    loss = run_step(model, micro, request.loss_fn, request.step_fn)
                if index == 0:
                    loss_value = float(loss.detach().float())
                loss = loss / fit.grad_accum
                (scaler.scale(loss) if scaler is not None else loss).backward()
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        backend.synchronize()
        seconds = time.perf_counter() - started
        peaks = backend.take_peaks()
    except Exception as exc:
        failure = exc
        if is_out_of_memory(exc):
            message = (
                f"the fit ran out of memory in a real step on {backend.name()} "
                f"(micro-batch {fit.micro_batch}, predicted {fit.predicted_bytes / GIB:.2f} "
                f"GiB): retry with a larger margin (margin={min(0.5, fit.margin + 0.1):.2f}) or "
                f"micro_batch={max(1, fit.micro_batch // 2)}"
            )
        else:
            message = forward_failure(exc, model, "a real step of the sample batch")
    finally:
        del optimizer
        _restore(model, trainable, saved, buffers, grads, training)
        torch.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        backend.release()
    if failure is not None:
        del failure
        raise MeasureError(message)
    allocated, reserved, used = peaks
    return Confirmed(
        device=backend.name(),
        seconds=seconds,
        loss=loss_value,
        peak_allocated_bytes=allocated,
        peak_reserved_bytes=reserved,
        predicted_reserved_bytes=fit.estimate.peak_reserved_bytes,
        used_bytes=used,
    )


def _restore(
    model: torch.nn.Module,
    trainable: list[torch.nn.Parameter],
    saved: list[torch.Tensor],
    buffers: list[tuple[torch.Tensor, torch.Tensor]],
    grads: list[tuple[torch.nn.Parameter, torch.Tensor | None]],
    training: dict[torch.nn.Module, bool],
) -> None:
    with torch.no_grad():
        for p, value in zip(trainable, saved, strict=True):
            p.copy_(value)
        for b, value in buffers:
            b.copy_(value)
    for p, grad in grads:
        p.grad = grad
    for module, mode in training.items():
        module.training = mode  # NB: each module's own mode, not the root's for all


def _rows_of(sample: UserBatch, rows: int) -> UserBatch:
    """`sample` with `rows` rows: cut, or repeated along the batch dimension."""

    def resize(t: torch.Tensor) -> torch.Tensor:
        have = t.shape[0]
        if have >= rows:
            return t[:rows]
        times = -(-rows // have)
        return t.repeat(times, *([1] * (t.dim() - 1)))[:rows]

    if isinstance(sample, torch.Tensor):
        return resize(sample)
    if isinstance(sample, Mapping):
        # NB: any mapping (transformers' BatchEncoding is a UserDict): the model takes **batch
        return {k: resize(v) if isinstance(v, torch.Tensor) else v for k, v in sample.items()}
    items: Any = [resize(v) if isinstance(v, torch.Tensor) else v for v in sample]
    return rebuild_sequence(type(sample), items)
