"""Where in the training step the process is: hooks on the model and the optimizer.

The tracker answers, at any moment (and so at an out-of-memory error), which phase of the step
runs and in which module:

- forward: a forward pre-hook on every module pushes its qualified name, its forward hook pops
  it; an exception skips the pop, so the innermost module that was running stays on top.
- loss: after the model's forward returned and before its output's gradient arrived (the loss,
  and the loss's own backward).
- backward: a gradient hook on every module output that needs one names the module whose
  gradient was last computed; the first one of a backward queues a callback for its end.
- optimizer: between the optimizer's step pre- and post-hooks (when the optimizer is given).
- data/other: anything else (data loading, logging, zero_grad, an optimizer not given).

Known limitations: hooks cost two Python calls per module per forward and one per output per
backward; torch.compile graphs break at them; a module's output shared with its parent names
the innermost module; backward of a checkpointed block re-runs its forward, which is reported
as backward (with `recompute_seen` set); an optimizer stepped with a closure (LBFGS) runs its
forward and backward inside "optimizer" and is reported by those phases instead.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from enum import Enum
from typing import Any

import torch
from torch import nn


class StepPhase(str, Enum):
    """The part of a training step."""

    DATA = "data/other"
    FORWARD = "forward"
    LOSS = "loss"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"


def _tensors(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """The tensors in a module output: tensors, tuples, lists, dicts (HF ModelOutput)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 3 and isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item, depth + 1)


class PhaseTracker:
    """Hooks on a model (and optionally optimizers) that follow the phase of the step.

    The hooks only read: they return None and so change no value and no gradient.
    """

    def __init__(self) -> None:
        self.phase = StepPhase.DATA
        self._stack: list[str] = []
        self._backward_module: str | None = None
        self._types: dict[str, str] = {}
        self._handles: list[Any] = []
        self._hooked: weakref.WeakValueDictionary[int, torch.Tensor] = weakref.WeakValueDictionary()
        self._end_queued = False
        self._root: str = ""
        self.active = False
        self.forwards = 0
        """Training-mode forwards of the model since the last `step_done()`."""
        self.last_forwards = 0
        """Training-mode forwards of the last optimizer step (its accumulation)."""
        self.micro_batch: int | None = None
        """Leading size of the first tensor argument of the last training forward."""
        self.autocast_seen = False
        """Autocast was on during a forward of the model."""
        self.recompute_seen = False
        """A forward ran inside backward: activation checkpointing is in use."""

    # -- what the tracker says -------------------------------------------------------------

    @property
    def module(self) -> str | None:
        """The qualified name of the module the phase is in (the model's class for itself)."""
        if self.phase is StepPhase.FORWARD and self._stack:
            return self._stack[-1]
        if self.phase is StepPhase.BACKWARD:
            return self._backward_module
        return None

    def module_type(self, name: str | None) -> str | None:
        return None if name is None else self._types.get(name)

    def set_phase(self, phase: StepPhase) -> None:
        """For adapters whose framework announces a phase (e.g. before the optimizer step)."""
        if self.active:
            self.phase = phase

    def step_done(self) -> None:
        """An optimizer step finished: the next work is data loading until a forward starts."""
        self.phase = StepPhase.DATA
        self._stack.clear()
        self._backward_module = None
        self.last_forwards = self.forwards
        self.forwards = 0

    # -- attaching -------------------------------------------------------------------------

    def attach_model(self, model: nn.Module) -> None:
        self.active = True
        self._root = type(model).__name__
        for name, module in model.named_modules():
            label = name or self._root
            self._types[label] = type(module).__name__
            root = module is model
            self._handles.append(module.register_forward_pre_hook(self._pre(label, root)))
            self._handles.append(module.register_forward_hook(self._post(label, root)))

    def attach_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        self.active = True
        self._handles.append(optimizer.register_step_pre_hook(self._optimizer_pre))
        self._handles.append(optimizer.register_step_post_hook(self._optimizer_post))

    def detach(self) -> None:
        """Remove every hook; gradient hooks on tensors still alive become no-ops."""
        self.active = False
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    # -- hooks -----------------------------------------------------------------------------

    def _pre(self, name: str, root: bool) -> Any:
        def hook(module: nn.Module, args: tuple[Any, ...]) -> None:
            if not self.active:
                return
            if _in_backward():
                self.recompute_seen = True  # NB: checkpointing re-runs forward in backward
                return
            if root:
                self._stack.clear()
                self._end_queued = False
                if module.training and torch.is_grad_enabled():
                    self.forwards += 1
                    first = next(_tensors(args), None)
                    if first is not None and first.dim() > 0:
                        self.micro_batch = int(first.shape[0])
                if _autocast_on():
                    self.autocast_seen = True
            self.phase = StepPhase.FORWARD
            self._stack.append(name)

        return hook

    def _post(self, name: str, root: bool) -> Any:
        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            if not self.active or self.phase is not StepPhase.FORWARD:
                return
            if self._stack and self._stack[-1] == name:
                self._stack.pop()
            if torch.is_grad_enabled():
                for tensor in _tensors(output):
                    self._hook_grad(tensor, name)
            if root:
                self.phase = StepPhase.LOSS

        return hook

    def _hook_grad(self, tensor: torch.Tensor, name: str) -> None:
        if not tensor.requires_grad or tensor.grad_fn is None:
            return  # NB: never hook a leaf (a parameter): its hook would outlive the step
        if self._hooked.get(id(tensor)) is tensor:
            return  # NB: the inner module's hook is already on this tensor: it names it
        try:
            tensor.register_hook(self._grad(name))
        except RuntimeError:
            return
        self._hooked[id(tensor)] = tensor

    def _grad(self, name: str) -> Any:
        def hook(grad: torch.Tensor) -> None:
            if not self.active:
                return
            self._backward_module = name
            if self.phase is not StepPhase.BACKWARD:
                self.phase = StepPhase.BACKWARD
            if not self._end_queued:
                self._end_queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._backward_end)

        return hook

    def _backward_end(self) -> None:
        self._end_queued = False
        if self.active and self.phase is StepPhase.BACKWARD:
            self.phase = StepPhase.DATA
            self._backward_module = None

    def _optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.active:
            self.phase = StepPhase.OPTIMIZER

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.active:
            self.phase = StepPhase.DATA


def _in_backward() -> bool:
    """Whether this thread runs the autograd engine now (a forward here is a recompute)."""
    task = getattr(torch._C, "_current_graph_task_id", None)
    return task is not None and task() != -1


def _autocast_on() -> bool:
    for device_type in ("cuda", "cpu", "mps"):
        try:
            if torch.is_autocast_enabled(device_type):
                return True
        except (TypeError, RuntimeError):  # NB: torch < 2.4 takes no device type
            return torch.is_autocast_enabled()
    return False
