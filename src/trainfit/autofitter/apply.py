"""What autofit does to the user's own model: freeze, checkpoint, cast, move (its optimizers:
`trainfit.optim`).

Checkpointing on a transformers model is its own `gradient_checkpointing_enable` (non-reentrant);
on a plain module each block's `forward` is wrapped in `torch.utils.checkpoint.checkpoint`
(non-reentrant), the blocks chosen as the estimate chose them (`training.enable_checkpointing`:
every `nn.ModuleList` not inside another, or the modules a glob names). Applying again first
undoes what an earlier fit applied, so a re-plan can turn checkpointing off.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from trainfit.errors import SpecError
from trainfit.models.live import CHECKPOINT_MARK, is_hf_model
from trainfit.models.program import (
    hf_checkpointing,
    hf_checkpointing_disable,
    hf_checkpointing_enable,
)
from trainfit.models.source import build_program
from trainfit.spec import Precision, TrainSpec
from trainfit.training import enable_checkpointing

HF_CHECKPOINTING = "transformers' gradient checkpointing (each decoder/encoder layer)"


def check_freeze(model: nn.Module, freeze: Sequence[str]) -> None:
    """SpecError naming each freeze pattern that matches no parameter of `model` (by any of
    its names: a tied weight is matched under each module that holds it)."""
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    bad = [p for p in freeze if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if bad:
        sample = ", ".join(names[:4])
        raise SpecError(
            [
                f"freeze pattern {p!r} matches no parameter; names look like {sample}, ..."
                for p in bad
            ]
        )


def _frozen(model: nn.Module, freeze: Sequence[str]) -> set[int]:
    """The ids of the parameters one of whose names matches a pattern."""
    return {
        id(param)
        for name, param in model.named_parameters(remove_duplicate=False)
        if any(fnmatch.fnmatchcase(name, p) for p in freeze)
    }


def spec_freeze(model: nn.Module, freeze: Sequence[str]) -> tuple[str, ...]:
    """`freeze` for the estimator, which names each parameter once (`named_parameters()`):
    a pattern that matches a tied weight only under another name (GPT-2's `lm_head.weight`,
    which is `transformer.wte.weight`) is replaced by the names the estimator sees."""
    names = [n for n, _ in model.named_parameters()]
    first = {id(p): n for n, p in model.named_parameters()}
    out: list[str] = []
    for pattern in freeze:
        if any(fnmatch.fnmatchcase(n, pattern) for n in names):
            out.append(pattern)
            continue
        for pid in _frozen(model, [pattern]):
            escaped = "".join(f"[{c}]" if c in "*?[" else c for c in first[pid])
            if escaped not in out:
                out.append(escaped)
    return tuple(out)


def apply_freeze(model: nn.Module, freeze: Sequence[str]) -> None:
    """Parameters one of whose names matches a pattern are frozen, every other one trains."""
    frozen = _frozen(model, freeze)
    for param in model.parameters():
        param.requires_grad_(id(param) not in frozen)


def checkpoint_names(spec: TrainSpec) -> list[str]:
    """The modules the estimate of `spec` checkpoints (its meta copy, as the trace does)."""
    return enable_checkpointing(build_program(spec, "meta"), spec.checkpoint_modules)


def apply_checkpointing(model: nn.Module, spec: TrainSpec) -> tuple[str, ...]:
    """Undo earlier checkpointing, then checkpoint as `spec` says; the checkpointed modules."""
    remove_checkpointing(model)
    if not spec.checkpointing:
        return ()
    if (
        is_hf_model(model)
        and spec.checkpoint_modules is None
        and getattr(model, "supports_gradient_checkpointing", False)
    ):
        # NB: the estimate checkpoints the blocks of the largest ModuleList (the layers),
        # which are the modules transformers checkpoints in its models
        hf_checkpointing_enable(model, {"use_reentrant": False})
        return (HF_CHECKPOINTING,)
    names = checkpoint_names(spec)
    modules = dict(model.named_modules())
    for name in names:
        _wrap(modules[name])
    return tuple(names)


def remove_checkpointing(model: nn.Module) -> None:
    """Turn off the checkpointing an earlier fit applied."""
    for module in model.modules():
        forward = vars(module).get("forward")
        if forward is not None and getattr(forward, CHECKPOINT_MARK, False):
            del module.forward
    if is_hf_model(model) and hf_checkpointing(model):
        hf_checkpointing_disable(model)


def _wrap(module: nn.Module) -> None:
    from torch.utils.checkpoint import checkpoint

    inner = module.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return inner(*args, **kwargs)
        return checkpoint(inner, *args, use_reentrant=False, **kwargs)

    setattr(forward, CHECKPOINT_MARK, True)
    module.forward = forward  # type: ignore[method-assign]


def apply_numerics(model: nn.Module, precision: Precision, device: torch.device | None) -> None:
    """Cast (pure-bf16) and move the model; turn on TF32 matmuls for tf32 on CUDA.

    NB: TF32 is a process-wide switch (`torch.backends.cuda.matmul.allow_tf32`)."""
    if hasattr(getattr(model, "config", None), "use_cache"):
        model.config.use_cache = False  # NB: training never reads a KV cache
    dtype = torch.bfloat16 if precision is Precision.PURE_BF16 else None
    if device is not None or dtype is not None:
        model.to(device=device, dtype=dtype)
    if precision is Precision.TF32 and device is not None and device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
