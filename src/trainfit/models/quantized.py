"""QLoRA's 4-bit base layers, modelled without bitsandbytes.

`Linear4bitStandIn` holds what `bitsandbytes.nn.Linear4bit` holds for an NF4 weight with double
quantisation (bitsandbytes' `quantize_4bit(blocksize=64, compress_statistics=True)`):

- the packed weight: two 4-bit codes per uint8, numel / 2 bytes;
- the block absmax, itself quantised to uint8: one byte per 64-weight block;
- the absmax's own fp32 absmax: 4 bytes per 256 blocks;
- the bias (if any) in the compute dtype.

Its forward runs what bitsandbytes' `MatMul4Bit` runs: the weight is dequantised to the compute
dtype as a temporary (after the absmax is dequantised to fp32), multiplied, and freed; nothing
dequantised is saved for backward, which dequantises again for the input gradient. The base is
frozen, so no weight gradient is made.

Known limitations:
- the dequantisation writes zeros (the values are fake): its cost is that of a fill of the
  dequantised weight, not of the read of the packed codes as well;
- the NF4 and nested code tables and the offset (a few hundred bytes per layer) are not held;
- peft's `lora.bnb.Linear4bit` clones the base output before adding the adapters' (one
  output-sized temporary per layer): not reproduced, peft's plain `lora.Linear` runs instead.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

BLOCK = 64
"""bitsandbytes' 4-bit blocksize: one absmax per 64 weights."""
NESTED_BLOCK = 256
"""Double quantisation: the absmax is quantised to uint8 in blocks of 256, one fp32 each."""


def quantized_bytes(numel: int) -> int:
    """Bytes bitsandbytes holds for a 4-bit NF4 weight of `numel` elements, double-quantised."""
    blocks = -(-numel // BLOCK)
    return -(-numel // 2) + blocks + 4 * -(-blocks // NESTED_BLOCK)


class _MatMul4Bit(torch.autograd.Function):
    """x @ dequantise(W).T, saving no dequantised weight (bitsandbytes' MatMul4Bit)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, layer: Linear4bitStandIn) -> torch.Tensor:
        ctx.layer = layer
        weight = layer.dequantize(x.dtype)
        return F.linear(x, weight, layer.bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        weight = ctx.layer.dequantize(grad.dtype)
        return grad @ weight, None


class Linear4bitStandIn(nn.Module):
    """What `bnb.nn.Linear4bit` holds and allocates (see the module docstring)."""

    def __init__(self, base: nn.Module, compute_dtype: torch.dtype) -> None:
        super().__init__()
        weight = base.weight
        if type(base).__name__ == "Conv1D":  # transformers' Conv1D stores (in, out)
            self.in_features, self.out_features = weight.shape
        else:
            self.out_features, self.in_features = weight.shape
        numel = weight.numel()
        blocks = -(-numel // BLOCK)
        device = weight.device
        self.compute_dtype = compute_dtype
        self.weight = nn.Parameter(
            torch.empty((-(-numel // 2), 1), dtype=torch.uint8, device=device),
            requires_grad=False,
        )
        self.register_buffer("absmax", torch.empty(blocks, dtype=torch.uint8, device=device))
        self.register_buffer(
            "nested_absmax",
            torch.empty(-(-blocks // NESTED_BLOCK), dtype=torch.float32, device=device),
        )
        bias = getattr(base, "bias", None)
        self.bias = (
            None
            if bias is None
            else nn.Parameter(bias.detach().to(compute_dtype), requires_grad=False)
        )

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        """The weight in `dtype`, (out, in): a fresh temporary, as bitsandbytes makes it."""
        absmax = self.nested_absmax.new_zeros(self.absmax.shape)  # fp32 absmax, freed on return
        del absmax
        return torch.zeros(
            (self.out_features, self.in_features), dtype=dtype, device=self.weight.device
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        # NB: bitsandbytes casts the input to the compute dtype and the output back
        out = _MatMul4Bit.apply(x.to(self.compute_dtype), self)
        return out.to(dtype)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, nf4, {self.compute_dtype}"


def quantize_linears(model: nn.Module, skip: nn.Module | None, dtype: torch.dtype) -> int:
    """Replace every Linear/Conv1D but `skip` (the output head) and the LoRA adapters by a
    4-bit stand-in computing in `dtype`; return how many were replaced."""
    from peft.tuners.lora import LoraLayer

    from trainfit.models.lora import _linear_classes

    classes = _linear_classes()
    adapters: set[int] = set()
    for module in model.modules():
        if isinstance(module, LoraLayer):
            for part in (module.lora_A, module.lora_B):
                adapters.update(id(m) for m in part.modules())
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, classes) and child is not skip and id(child) not in adapters:
                setattr(parent, name, Linear4bitStandIn(child, dtype))
                replaced += 1
    return replaced
