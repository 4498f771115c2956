"""`Fit`: the settings autofit chose, and what a plain training loop needs from them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainfit.errors import SpecError
from trainfit.estimator.result import Estimate
from trainfit.hardware.units import GIB
from trainfit.models.live import UserBatch, rebuild_sequence
from trainfit.optim import build_optimizer
from trainfit.plan.options import SettingChange
from trainfit.spec import OptimizerKind, Precision, TrainSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class Confirmed:
    """One real optimizer step of the chosen settings on the local device."""

    device: str
    """The device's own name."""
    seconds: float
    """Wall time of the step (the first step: it creates the optimizer state)."""
    loss: float
    """The first micro-batch's loss (before the division by the accumulation count)."""
    peak_allocated_bytes: int | None
    """The allocator's peak (None on the CPU, which has no allocator counter)."""
    peak_reserved_bytes: int | None
    """The caching allocator's peak reserved memory (None on the CPU)."""
    predicted_reserved_bytes: int
    """The estimate's peak reserved memory for the same step."""
    used_bytes: int | None
    """The process's device memory after the step as `trainfit.measure` reads it (CUDA: on
    the card; the CPU: the resident set's peak increase over the start of the step)."""

    @property
    def ratio(self) -> float | None:
        """Predicted over measured peak reserved memory (None where not measured)."""
        if not self.peak_reserved_bytes:
            return None
        return self.predicted_reserved_bytes / self.peak_reserved_bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """What autofit was asked (kept so that `Fit.replan` can ask again with changes)."""

    model: nn.Module
    sample: UserBatch
    effective_batch: int
    optimizer: torch.optim.Optimizer | str | OptimizerKind
    loss_fn: Callable[..., torch.Tensor] | None
    step_fn: Callable[[nn.Module, Any], torch.Tensor] | None
    device: str | None
    precision: Precision | str | None
    checkpointing: bool | None
    checkpoint_modules: str | None
    freeze: tuple[str, ...] | None
    micro_batch: int | None
    margin: float
    confirm: bool
    apply: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Fit:
    """The settings of a training loop that fit the device, applied to the model.

    Use in a loop (see `examples/train_autofit.py`):

        for batch in loader:                        # batches of fit.effective_batch rows
            for micro in fit.split(batch):          # fit.grad_accum micro-batches
                with fit.autocast():
                    loss = loss_fn(model(micro[0]), micro[1]) / fit.grad_accum
                (fit.scaler.scale(loss) if fit.scaler else loss).backward()
            fit.scaler.step(opt) if fit.scaler else opt.step()   # and fit.scaler.update()
            opt.zero_grad(set_to_none=True)
    """

    micro_batch: int
    """Samples per forward/backward."""
    grad_accum: int
    """Micro-batches per optimizer step."""
    effective_batch: int
    """Samples per optimizer step: micro_batch x grad_accum."""
    precision: Precision
    """fp32, tf32, fp16 or bf16 autocast, or pure-bf16 (the model cast to bf16)."""
    checkpointing: bool
    """Activation checkpointing is on."""
    checkpointed: tuple[str, ...]
    """The checkpointed modules (or transformers' own checkpointing)."""
    optimizer_kind: OptimizerKind
    """The optimizer the estimate assumed (8-bit AdamW only where bitsandbytes is installed)."""
    device: torch.device
    """Where the loop runs: the local device, or the kind of a catalog device planned for."""
    catalog_device: str
    """The catalog device the estimate is for."""
    local: bool
    """The estimate is for this machine's device: the model was moved there, confirm can run."""
    predicted_bytes: int
    """Device memory one optimizer step needs (the estimate of `spec`)."""
    device_memory_bytes: int | None
    """The device's memory (the host's RAM for the CPU)."""
    margin: float
    """Fraction of the device's memory kept free."""
    max_micro_batch: int
    """The largest micro-batch of these settings inside the margin."""
    trainable_parameters: int
    parameters: int
    scaler: torch.amp.GradScaler | None
    """The loss scaler for fp16 autocast, else None."""
    spec: TrainSpec
    """The estimated step (the model as a live import path): `trainfit.estimate(fit.spec)`."""
    estimate: Estimate = field(repr=False)
    """The estimate of `spec`."""
    confirmed: Confirmed | None = None
    """The real step, when autofit ran one."""
    changes: tuple[SettingChange, ...] = ()
    """What the plan changed from the request (words: `trainfit.plan.words.change_text`)."""
    request: Request = field(repr=False, compare=False)
    planner: Callable[..., Fit] = field(repr=False, compare=False)
    """`autofit` itself: what `replan` asks again (passed in, so that this module does not
    import the one that makes fits)."""
    live: Any = field(default=None, repr=False, compare=False)
    """The live model's registration: `spec`'s import paths resolve while the fit lives."""

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The forward's context: `torch.autocast` for fp16/bf16, else a no-op."""
        dtype = self.precision.autocast_dtype
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=dtype)

    def split(self, batch: UserBatch) -> Iterator[UserBatch]:
        """The `grad_accum` micro-batches of `micro_batch` rows of `batch` (a tensor, tuple or
        dict of tensors, batch dimension first, `effective_batch` rows), moved to `device` when
        the fit is local; floating tensors cast to bf16 under pure-bf16.

        A batch of another number of rows is a SpecError: it would give another number of
        micro-batches than `grad_accum`, and the loss divided by `grad_accum` would be wrong.
        (For a short last batch of an epoch, drop it or autofit again for its size.)"""
        rows = _rows(batch)
        if rows != self.effective_batch:
            raise SpecError(
                [
                    f"fit.split takes a batch of effective_batch={self.effective_batch} rows "
                    f"({self.micro_batch} x {self.grad_accum}), got {rows} rows: another "
                    "number of micro-batches would make the loss / grad_accum wrong; drop a "
                    "short last batch (drop_last=True) or batch by fit.effective_batch"
                ]
            )
        for start in range(0, rows, self.micro_batch):
            part = slice(start, start + self.micro_batch)
            yield self._move(_map(batch, lambda t, part=part: t[part]))

    def _move(self, batch: UserBatch) -> UserBatch:
        """`batch` moved to `device` when the fit is local, floats cast under pure-bf16."""
        move = self.device if self.local else None
        cast = torch.bfloat16 if self.precision is Precision.PURE_BF16 else None
        return _map(batch, lambda t: _prepare(t, move, cast))

    def make_optimizer(
        self, params: Sequence[nn.Parameter] | None = None, **kwargs: Any
    ) -> torch.optim.Optimizer:
        """A fresh optimizer of the chosen kind over `params` (default: the model's trainable
        parameters); the given optimizer's class and defaults when autofit was given one.
        Keyword arguments go to its constructor (lr, weight_decay ...)."""
        if params is None:
            params = [p for p in self.request.model.parameters() if p.requires_grad]
        like = self.request.optimizer
        return build_optimizer(
            self.optimizer_kind,
            params,
            like if isinstance(like, torch.optim.Optimizer) else None,
            **kwargs,
        )

    def replan(self, **changes: Any) -> Fit:
        """Autofit again with some arguments changed, e.g. at a stage switch:
        `fit.replan(freeze=())` makes every parameter trainable and re-plans."""
        unknown = sorted(set(changes) - set(Request.__slots__) - {"model"})
        if unknown or "model" in changes:
            raise SpecError(
                [f"replan takes autofit's arguments except the model, got {unknown or ['model']}"]
            )
        values = {name: getattr(self.request, name) for name in Request.__slots__}
        values.update(changes)
        model = values.pop("model")
        sample = values.pop("sample")
        effective = values.pop("effective_batch")
        return self.planner(model, sample, effective, **values)

    @property
    def summary(self) -> str:
        """A few lines: the settings, the split, the memory and the confirmation."""
        return render_summary(self)


def render_summary(fit: Fit) -> str:
    """The summary of `fit` (see `Fit.summary`)."""
    name = type(fit.request.model).__name__
    trainable = (
        f"{_count(fit.parameters)} parameters"
        if fit.trainable_parameters == fit.parameters
        else f"{_count(fit.trainable_parameters)} of {_count(fit.parameters)} parameters trained"
    )
    numerics = {
        Precision.FP32: "fp32",
        Precision.TF32: "tf32 matmuls",
        Precision.FP16: "fp16 autocast + GradScaler",
        Precision.BF16: "bf16 autocast",
        Precision.PURE_BF16: "pure bf16 (model cast)",
    }[fit.precision]
    ckpt = "gradient checkpointing" if fit.checkpointing else "no checkpointing"
    of = f" of {fit.device_memory_bytes / GIB:.1f} GiB" if fit.device_memory_bytes else ""
    lines = [
        f"autofit {name} ({trainable}) for {fit.estimate.device.display}: {numerics}, {ckpt}, "
        f"{fit.optimizer_kind.value}",
        f"  micro-batch {fit.micro_batch} x {fit.grad_accum} accumulation = effective batch "
        f"{fit.effective_batch}; predicted {_size(fit.predicted_bytes)}{of} "
        f"(margin {fit.margin:.0%}, largest micro-batch that fits {fit.max_micro_batch})",
    ]
    c = fit.confirmed
    if c is not None:
        line = (
            f"  confirmed by one real step on {c.device} in {c.seconds:.2f} s (loss {c.loss:.4g})"
        )
        if c.peak_reserved_bytes is not None and c.ratio is not None:
            line += (
                f": peak reserved {_size(c.peak_reserved_bytes)} measured, "
                f"{_size(c.predicted_reserved_bytes)} predicted ({c.ratio:.2f}x)"
            )
        elif c.used_bytes is not None:
            line += f": resident memory grew {_size(max(0, c.used_bytes))} during the step"
        lines.append(line)
    elif not fit.local:
        lines.append(
            f"  estimate only: planned for {fit.catalog_device}, not this machine's device "
            "(the model was not moved)"
        )
    return "\n".join(lines)


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return str(n)


def _size(n: int) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 2**20:.1f} MiB"


def _rows(batch: UserBatch) -> int:
    tensors = _tensors(batch)
    if not tensors or tensors[0].dim() == 0:
        raise SpecError(["a batch to split holds no tensor with a batch dimension"])
    return int(tensors[0].shape[0])


def _tensors(batch: UserBatch) -> list[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        return [batch]
    values = batch.values() if isinstance(batch, Mapping) else batch
    return [v for v in values if isinstance(v, torch.Tensor)]


def _map(batch: UserBatch, fn: Callable[[torch.Tensor], torch.Tensor]) -> UserBatch:
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, Mapping):
        return {k: fn(v) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    items = [fn(v) if isinstance(v, torch.Tensor) else v for v in batch]
    return rebuild_sequence(type(batch), items)


def _prepare(
    tensor: torch.Tensor, device: torch.device | None, cast: torch.dtype | None
) -> torch.Tensor:
    dtype = cast if cast is not None and tensor.is_floating_point() else None
    if device is None and dtype is None:
        return tensor
    return tensor.to(device=device, dtype=dtype, non_blocking=True)
