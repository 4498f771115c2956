"""Scaled-dot-product attention as a CUDA GPU would run it.

On the CPU, `F.scaled_dot_product_attention` takes the math path (or a CPU flash kernel) and
saves very different tensors than the fused kernels a GPU picks. A kernel registered for the
duration of a trace replaces each call with the op CUDA's dispatcher would choose
(PyTorch's `_fused_sdp_choice` on sm80+:
flash, then memory-efficient, then math), called directly; those ops have meta kernels and
autograd formulas, so the trace allocates what the GPU allocates for outputs and saved state.

Known limitations: the flash and memory-efficient backward kernels allocate a few scratch
buffers inside (flash's fp32 dq accumulator, for example) that no meta kernel shows; they are
modelled in `trainfit.memory.runtime`. cuDNN attention is not chosen (PyTorch does not prefer
it on sm80/sm90 by default).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from enum import Enum

import torch

aten = torch.ops.aten


class SdpaBackend(str, Enum):
    """Attention kernels PyTorch can dispatch to on CUDA."""

    FLASH = "flash"
    EFFICIENT = "efficient"
    MATH = "math"


def choose_backend(
    dtype: torch.dtype,
    head_dim: int,
    value_dim: int,
    has_mask: bool,
    gqa: bool,
    compute_capability: tuple[int, int],
) -> SdpaBackend:
    """The kernel CUDA SDPA picks for these inputs (PyTorch's sdp_utils rules, simplified)."""
    half = dtype in (torch.float16, torch.bfloat16)
    same_dim = head_dim == value_dim
    if compute_capability >= (8, 0) and half and not has_mask and same_dim and head_dim <= 256:
        return SdpaBackend.FLASH
    if compute_capability >= (5, 0) and not gqa and head_dim % (8 if half else 4) == 0:
        return SdpaBackend.EFFICIENT
    return SdpaBackend.MATH


class CudaAttention:
    """Routes aten.scaled_dot_product_attention to the kernel a CUDA device would use.

    NB: the route is a Python kernel for the op's CompositeImplicitAutograd key, registered for
    the duration of a trace, so it also applies where torch-function modes do not reach (the
    recomputation of checkpointed blocks inside backward). Autocast has cast the inputs by the
    time it runs, as on CUDA.
    """

    def __init__(self, compute_capability: tuple[int, int]) -> None:
        self.capability = compute_capability
        self.chosen: dict[SdpaBackend, int] = {}

    @contextlib.contextmanager
    def installed(self) -> Iterator[CudaAttention]:
        """Register the routing kernel for the duration of the block."""
        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("scaled_dot_product_attention", self._sdpa, "CompositeImplicitAutograd")
        try:
            yield self
        finally:
            lib._destroy()

    def _sdpa(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> torch.Tensor:
        backend = choose_backend(
            query.dtype,
            query.shape[-1],
            value.shape[-1],
            attn_mask is not None,
            enable_gqa,
            self.capability,
        )
        self.chosen[backend] = self.chosen.get(backend, 0) + 1
        if backend is SdpaBackend.FLASH:
            out = aten._scaled_dot_product_flash_attention(
                query, key, value, dropout_p, is_causal, False, scale=scale
            )
            return out[0]
        if backend is SdpaBackend.EFFICIENT:
            if attn_mask is not None and attn_mask.dtype == torch.bool:
                # NB: CUDA converts a boolean mask to an additive float mask first
                attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill_(
                    attn_mask.logical_not(), float("-inf")
                )
            needs_lse = torch.is_grad_enabled() and any(
                t.requires_grad for t in (query, key, value)
            )
            out = aten._scaled_dot_product_efficient_attention(
                query, key, value, attn_mask, needs_lse, dropout_p, is_causal, scale=scale
            )
            return out[0]
        return aten._scaled_dot_product_attention_math(
            query,
            key,
            value,
            attn_mask,
            dropout_p,
            is_causal,
            None,
            scale=scale,
            enable_gqa=enable_gqa,
        )[0]
