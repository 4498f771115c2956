"""`nn.Module.to(dtype)`, `.half()`, `.float()`, `.bfloat16()` on a traced model.

A user's step function may cast the model (`model.to(torch.bfloat16)`) each step. On fake
tensors PyTorch's `Module._apply` always swaps each parameter for a new one
(`torch.utils.swap_tensors`), which fails twice over under the tracer: a parameter a weakref
points at cannot be swapped, and a tied weight (an embedding shared with the LM head), already
converted through its first module, is a no-op conversion through the second whose wrapper
cannot be swapped either ("Couldn't swap Embedding.weight").

On a real device `_apply` assigns `param.data` instead (no swap): the parameter keeps its
identity (the optimizer still holds it), its old storage is freed and the converted one
allocated. `conversions_in_place()` makes the traced model do the same: each distinct
parameter is converted once (a tie stays a tie), its gradient too, and a conversion that
returns the tensor itself changes nothing. The traced tensors stand for the target's device, so
a device move (`.to("cuda")`) changes no placement: only its dtype, if any, applies.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import nn

Convert = Callable[[torch.Tensor], torch.Tensor]


def _converted(tensor: torch.Tensor, fn: Convert) -> torch.Tensor:
    """`fn(tensor)`, on `tensor`'s device (a device move is the trace's own device)."""
    with torch.no_grad():
        applied = fn(tensor)
    if applied is tensor or applied.device == tensor.device:
        return applied
    if applied.dtype == tensor.dtype:
        return tensor
    return applied.to(tensor.device)


def _apply_in_place(module: nn.Module, fn: Convert, recurse: bool = True) -> nn.Module:
    """`nn.Module._apply`, assigning each converted parameter's `.data` (no swap)."""
    if recurse:
        for child in module.children():
            child._apply(fn)  # NB: a subclass's own _apply (an RNN's flat weights) still runs
    for param in module._parameters.values():
        if param is None:
            continue
        applied = _converted(param, fn)
        if applied is not param:
            param.data = applied
        grad = param.grad
        if grad is not None:
            new_grad = _converted(grad, fn)
            if new_grad is not grad:
                param.grad = new_grad
    for name, buffer in module._buffers.items():
        if buffer is not None:
            module._buffers[name] = _converted(buffer, fn)
    return module


@contextlib.contextmanager
def conversions_in_place() -> Iterator[None]:
    """While the block runs, `nn.Module.to()` and its kin convert parameters in place."""
    original = nn.Module._apply
    nn.Module._apply = _apply_in_place  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        nn.Module._apply = original  # type: ignore[method-assign]
