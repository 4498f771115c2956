"""Parameter-efficient fine-tuning: LoRA and QLoRA through peft's own modules.

`LoraSpec` says what the user asks (rank, alpha, dropout, target modules, 4-bit base);
`wrap_with_lora()` turns a built model into what `peft.get_peft_model` returns for it, so that
the traced step (and the real one `trainfit measure` runs) is the real wrapped graph: peft's
`lora.Linear` layers around frozen base layers, only the adapters trainable.

QLoRA is modelled without bitsandbytes (see `trainfit.models.quantized`): the base is loaded in
the compute dtype (as `from_pretrained(torch_dtype=..., quantization_config=...)` does), every
Linear but the output head is replaced by a stand-in holding what `bnb.nn.Linear4bit` holds, and
the optimizer is bitsandbytes' paged 8-bit AdamW (`trainfit.optim.EightBitAdamWStandIn`).

Known limitations:
- peft's `prepare_model_for_kbit_training` (which casts the non-quantised weights, embeddings
  and head included, to fp32) is not applied: QLoRA's non-quantised weights stay in the load
  dtype;
- a plain module's output head is taken to be its last Linear (peft cannot tell it either);
- QLoRA's paged optimizer state is counted as device memory (it pages out only under pressure).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from trainfit.errors import ModelLoadError, SpecError
from trainfit.models.program import Adapters
from trainfit.models.quantized import Linear4bitStandIn, linear_classes, quantize_linears
from trainfit.spec import LoraSpec, Precision


def compute_dtype(precision: Precision) -> torch.dtype:
    """The dtype QLoRA dequantises to and loads its non-quantised weights in."""
    if precision is Precision.PURE_BF16:
        return torch.bfloat16
    return precision.autocast_dtype or torch.float32


def candidate_names(model: nn.Module) -> list[str]:
    """Distinct leaf names of the model's Linear (and transformers Conv1D) modules, the output
    head left out."""
    classes = linear_classes()
    head = output_head(model)
    names = {
        n.rsplit(".", 1)[-1]
        for n, m in model.named_modules()
        if n and m is not head and isinstance(m, classes)
    }
    return sorted(names)


def output_head(model: nn.Module) -> nn.Module | None:
    """The output head: transformers' output embeddings, else (a plain module) the last
    Linear registered."""
    get = getattr(model, "get_output_embeddings", None)
    head = get() if callable(get) else None
    if head is None:
        # NB: a plain module's head is taken to be its last Linear (peft cannot tell either)
        linears = [m for n, m in model.named_modules() if isinstance(m, linear_classes())]
        head = linears[-1] if linears else None
    return head


def default_targets(model: nn.Module) -> list[str] | str:
    """peft's default target modules for the architecture, else every Linear but the head."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING

    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type in TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING:
        return list(TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING[model_type])
    head = output_head(model)
    return sorted(
        n
        for n, m in model.named_modules()
        if n and m is not head and isinstance(m, linear_classes())
    )


def _check_targets(model: nn.Module, targets: tuple[str, ...]) -> None:
    names = [n for n, _ in model.named_modules() if n]
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if not missing:
        return
    candidates = candidate_names(model)
    if candidates:
        known = f"its Linear modules are named {', '.join(candidates)}"
    else:
        head = output_head(model)
        name = next((n for n, m in model.named_modules() if m is head), None)
        known = (
            "it has no Linear module for adapters"
            if name is None
            else f"its only Linear module, {name!r}, is the output head (adapt it with "
            f"--lora-targets {name.rsplit('.', 1)[-1]})"
        )
    raise SpecError([f"LoRA target module {t!r} is not in the model; {known}" for t in missing])


def _peft() -> Any:
    try:
        import peft
    except ImportError as exc:
        raise ModelLoadError("LoRA needs peft: pip install peft") from exc
    return peft


def wrap_with_lora(
    model: nn.Module, lora: LoraSpec, precision: Precision, device: torch.device
) -> tuple[nn.Module, Adapters]:
    """`peft.get_peft_model(model, LoraConfig(...))` as a user would call it, and what was
    adapted; with QLoRA the model is first cast to the compute dtype and
    the base Linears are then made 4-bit."""
    peft = _peft()
    _check_targets(model, lora.targets)
    targets = list(lora.targets) or default_targets(model)
    head = output_head(model)
    if lora.qlora:
        # NB: QLoRA loads with torch_dtype=compute dtype; peft then makes its adapters in that
        # dtype and upcasts them to fp32 (autocast_adapter_dtype=True)
        model.to(compute_dtype(precision))
    config = peft.LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
    )
    # NB: no task_type: peft's task wrappers add nothing to a LoRA step's memory
    with torch.device(device), warnings.catch_warnings():
        # NB: peft warns that it sets fan_in_fan_out for transformers' Conv1D (GPT-2), as it must
        warnings.filterwarnings("ignore", message="fan_in_fan_out", category=UserWarning)
        # NB: peft reads transformers' deprecated is_gradient_checkpointing (5.2x warns)
        warnings.filterwarnings(
            "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
        )
        try:
            wrapped = peft.get_peft_model(model, config)
        except ValueError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise SpecError(
                [
                    f"peft cannot put LoRA on {targets}: {first}; choose among the Linear "
                    f"modules {', '.join(candidate_names(model))}"
                ]
            ) from exc
    if lora.qlora:
        quantize_linears(wrapped, skip=head, dtype=compute_dtype(precision))
    named = ",".join(targets) if isinstance(targets, list) and len(targets) <= 8 else ""
    return wrapped, Adapters(lora=lora, default_targets="" if lora.targets else named)


def parameter_counts(model: nn.Module, exclude: set[int] = frozenset()) -> tuple[int, int]:
    """(all, trainable) parameter elements, ties counted once; a 4-bit base layer counts the
    weights it stands for, not its packed bytes. Parameters whose id is in `exclude` (a DPO
    reference copy's) are left out."""
    quantized = {
        id(m.weight): m.in_features * m.out_features
        for m in model.modules()
        if isinstance(m, Linear4bitStandIn)
    }
    seen: dict[int, tuple[int, bool]] = {}
    for p in model.parameters():
        if id(p) not in exclude:
            seen[id(p)] = (quantized.get(id(p), p.numel()), p.requires_grad)
    return sum(n for n, _ in seen.values()), sum(n for n, grad in seen.values() if grad)


def check_runnable(lora: LoraSpec | None) -> None:
    """Raise MeasureError where a real step of this setting cannot run here."""
    if lora is None:
        return
    from trainfit.errors import MeasureError

    if lora.qlora:
        raise MeasureError(
            "--qlora cannot be measured: a real QLoRA step needs bitsandbytes (pip install "
            "bitsandbytes), which trainfit measure does not drive; QLoRA is modelled in "
            "estimates only, and --lora RANK without --qlora measures the same adapters"
        )
    try:
        import peft  # noqa: F401
    except ImportError as exc:
        raise MeasureError("--lora needs peft for a real run: pip install peft") from exc
