"""One training step, written once and run two ways: traced on the meta device as the target
would run it, and for real on a device.

The step is the loop every PyTorch user writes: forward and loss under autocast, backward
(through a GradScaler for fp16), optional clipping, optimizer step, `zero_grad(set_to_none=True)`.
What differs between the two ways is injected: the autocast context, the scaler and how the
optimizer is made (`trainfit.optim`: `measured_optimizer` or `traced_optimizer`).
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

import torch
from torch import nn

from trainfit.errors import SpecError
from trainfit.models.program import Batch, StepProgram, hf_checkpointing_enable
from trainfit.spec import Precision, TrainSpec


class Phase(str, Enum):
    """Where in the step memory is allocated."""

    SETUP = "setup"
    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"


class Scaler(Protocol):
    """The part of torch.amp.GradScaler the step uses."""

    def scale(self, loss: torch.Tensor) -> torch.Tensor: ...

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None: ...

    def step(self, optimizer: torch.optim.Optimizer) -> Any: ...

    def update(self) -> None: ...


@dataclass(kw_only=True, slots=True)
class StepRig:
    """A model ready to train: the program, its optimizer and how to run autocast and scaling."""

    program: StepProgram
    optimizer: torch.optim.Optimizer
    autocast: Callable[[], contextlib.AbstractContextManager[Any]]
    scaler: Scaler | None
    spec: TrainSpec


def _nothing_to_train(model: nn.Module, freeze: tuple[str, ...]) -> str:
    """Why no parameter is left to train: the model has none, it froze them itself, or the
    freeze patterns did."""
    kind = type(model).__name__
    if not any(True for _ in model.parameters()):
        return f"{kind} has no parameters: there is nothing to train"
    frozen_by_patterns = any(
        fnmatch.fnmatchcase(name, pattern)
        for name, _ in model.named_parameters()
        for pattern in freeze
    )
    if not frozen_by_patterns:
        return (
            f"every parameter of {kind} has requires_grad=False (set by the model itself): "
            "there is nothing to train; leave some trainable in the model's factory"
        )
    return f"the freeze patterns {list(freeze)} freeze every parameter"


def apply_settings(program: StepProgram, spec: TrainSpec) -> list[nn.Parameter]:
    """Freeze, cast (pure-bf16) and enable checkpointing in place; return the trainable params."""
    model = program.model
    model.train()
    names = [name for name, _ in model.named_parameters()]
    for pattern in spec.freeze:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
            sample = ", ".join(names[:4])
            raise SpecError(
                [f"freeze pattern {pattern!r} matches no parameter; names look like {sample}, ..."]
            )
    trainable: list[nn.Parameter] = []
    for name, param in model.named_parameters():
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in spec.freeze):
            param.requires_grad_(False)
        elif param.requires_grad:
            trainable.append(param)
    if not trainable:
        raise SpecError([_nothing_to_train(model, spec.freeze)])
    if spec.checkpointing:
        enable_checkpointing(program, spec.checkpoint_modules)
    return trainable


def enable_checkpointing(program: StepProgram, pattern: str | None) -> list[str]:
    """Turn on activation checkpointing; return the names of the checkpointed modules."""
    model = program.model
    if program.is_hf and pattern is None:
        if not getattr(model, "supports_gradient_checkpointing", False):
            lists = [n for n, m in model.named_modules() if isinstance(m, nn.ModuleList)]
            hint = f", e.g. '{lists[-1]}.*'" if lists else ""
            raise SpecError(
                [
                    f"{type(model).__name__} does not support transformers' gradient "
                    f"checkpointing: name the blocks to checkpoint with --checkpoint-modules GLOB"
                    f"{hint}"
                ]
            )
        hf_checkpointing_enable(model)
        return ["(transformers' own layers)"]
    if pattern is None:
        lists = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.ModuleList)]
        if not lists:
            raise SpecError(
                [
                    f"{type(model).__name__} has no nn.ModuleList of blocks to checkpoint: "
                    "name the modules with --checkpoint-modules GLOB"
                ]
            )
        targets = [
            (f"{name}.{i}", block) for name, blocks in _outer_lists(lists) for i, block in
            enumerate(blocks)
        ]  # fmt: skip
    else:
        targets = [
            (n, m) for n, m in model.named_modules() if n and fnmatch.fnmatchcase(n, pattern)
        ]
        if not targets:
            raise SpecError([f"--checkpoint-modules {pattern!r} matches no module of the model"])
    for _, module in targets:
        _checkpoint_forward(module)
    return [n for n, _ in targets]


def _outer_lists(lists: list[tuple[str, nn.Module]]) -> list[tuple[str, nn.Module]]:
    """The ModuleLists not inside another: every list of blocks of the network (an encoder's
    and a decoder's), not the lists inside a block."""
    names = [n for n, _ in lists]
    return [(n, m) for n, m in lists if not any(n.startswith(f"{o}.") for o in names if o != n)]


def _checkpoint_forward(module: nn.Module) -> None:
    from torch.utils.checkpoint import checkpoint

    inner = module.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return inner(*args, **kwargs)
        return checkpoint(inner, *args, use_reentrant=False, **kwargs)

    module.forward = forward  # type: ignore[method-assign]


def forward_backward(
    rig: StepRig, batch: Batch, mark: Callable[[Phase], None] = lambda phase: None
) -> None:
    """One micro-batch: forward and loss under autocast, then backward (scaled for fp16)."""
    spec = rig.spec
    mark(Phase.FORWARD)
    with rig.autocast():
        loss = rig.program.compute_loss(rig.program.model, batch)
        if spec.grad_accum > 1:
            loss = loss / spec.grad_accum
    mark(Phase.BACKWARD)
    if rig.scaler is not None:
        rig.scaler.scale(loss).backward()
    else:
        loss.backward()


MicroBatchPass = Callable[[int], None]
"""Runs forward and backward of micro-batch `index` (the tracer may replay one instead)."""


def run_iteration(
    rig: StepRig,
    batch: Batch,
    mark: Callable[[Phase], None] = lambda phase: None,
    micro_batches: int | None = None,
    micro_batch_pass: MicroBatchPass | None = None,
) -> None:
    """One optimizer step: `micro_batches` forward/backward passes, then clip, step, zero_grad."""
    spec = rig.spec
    for index in range(micro_batches or spec.grad_accum):
        if micro_batch_pass is None:
            forward_backward(rig, batch, mark)
        else:
            micro_batch_pass(index)
    mark(Phase.OPTIMIZER)
    if rig.scaler is not None:
        if spec.grad_clip is not None:
            rig.scaler.unscale_(rig.optimizer)
            _clip(rig)
        rig.scaler.step(rig.optimizer)
        rig.scaler.update()
    else:
        if spec.grad_clip is not None:
            _clip(rig)
        rig.optimizer.step()
    rig.optimizer.zero_grad(set_to_none=True)


def _clip(rig: StepRig) -> None:
    params = [p for group in rig.optimizer.param_groups for p in group["params"]]
    torch.nn.utils.clip_grad_norm_(params, rig.spec.grad_clip)


@contextlib.contextmanager
def no_context() -> Iterator[None]:
    """An empty autocast context (fp32, tf32, pure-bf16)."""
    yield


def needs_scaler(precision: Precision) -> bool:
    """fp16 autocast trains with a GradScaler."""
    return precision is Precision.FP16
