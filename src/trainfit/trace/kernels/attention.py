"""Scaled-dot-product attention as a CUDA GPU would run it.

On the CPU, `F.scaled_dot_product_attention` takes the math path (or a CPU flash kernel) and
saves very different tensors than the fused kernels a GPU picks. A kernel registered for the
duration of a trace replaces each call with the op CUDA's dispatcher would choose
(PyTorch's `_fused_sdp_choice` on sm80+: cuDNN on Hopper, flash, memory-efficient, then
math), called directly; those ops have meta kernels and autograd formulas, so the trace
allocates what the GPU allocates for outputs and saved state.

Known limitations: the flash and memory-efficient backward kernels allocate a few scratch
buffers inside (flash's fp32 dq accumulator, for example) that no meta kernel shows; they are
not modelled, except cuDNN's dropout scratch (measured). cuDNN attention's own meta kernel is
not used: flash's stands in (same saved tensors).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

import torch

from trainfit.trace.compat import registered
from trainfit.trace.recorder import LIBRARY_OP, labelled

aten = torch.ops.aten


class SdpaBackend(str, Enum):
    """Attention kernels PyTorch can dispatch to on CUDA."""

    FLASH = "flash"
    EFFICIENT = "efficient"
    CUDNN = "cudnn"
    MATH = "math"


def choose_backend(
    dtype: torch.dtype,
    head_dim: int,
    value_dim: int,
    mask: str,
    gqa: bool,
    compute_capability: tuple[int, int],
) -> SdpaBackend:
    """The kernel CUDA SDPA picks for these inputs (PyTorch 2.11's sdp_utils, simplified).

    `mask` is "none", "plain" (a mask that needs no gradient) or "grad" (a learned bias, as
    T5's position bias). Checked on an H100 with torch 2.11 (the `sdpa_probe` record in
    benchmarks/accuracy/results/measured_h100.json): fp16/bf16 take cuDNN attention with or
    without a plain mask and with grouped-query heads; a mask that needs a gradient and all
    fp32 inputs take the memory-efficient kernel.
    """
    half = dtype in (torch.float16, torch.bfloat16)
    same_dim = head_dim == value_dim
    hopper_or_newer = compute_capability >= (9, 0)
    if hopper_or_newer and half and mask != "grad" and same_dim and head_dim <= 256:
        return SdpaBackend.CUDNN
    if compute_capability >= (8, 0) and half and mask == "none" and same_dim and head_dim <= 256:
        return SdpaBackend.FLASH
    if compute_capability >= (5, 0) and not gqa and head_dim % (8 if half else 4) == 0:
        return SdpaBackend.EFFICIENT
    return SdpaBackend.MATH


@dataclass(frozen=True, slots=True)
class SdpaCall:
    """What the kernel choice of one SDPA call depends on (its shape aside)."""

    dtype: torch.dtype
    head_dim: int
    value_dim: int
    mask: str
    gqa: bool
    strided_mask: bool
    scratch_eligible: bool
    """Dropout in training under `CUDNN_SCRATCH_MAX_SEQ` tokens (cuDNN's scratch applies)."""


def traced_kernel(call: SdpaCall, compute_capability: tuple[int, int]) -> tuple[str, bool]:
    """The op the trace runs for `call` on a device, and whether cuDNN's scratch is emitted:
    two devices trace a step identically when this agrees for every call."""
    if call.strided_mask:
        return SdpaBackend.MATH.value, False
    backend = choose_backend(
        call.dtype, call.head_dim, call.value_dim, call.mask, call.gqa, compute_capability
    )
    if backend is SdpaBackend.CUDNN:
        if call.mask == "none":
            return SdpaBackend.FLASH.value, call.scratch_eligible
        return SdpaBackend.EFFICIENT.value, False
    return backend.value, False


_THRESHOLDS = ((9, 0), (8, 0), (5, 0))
"""The compute capabilities `choose_backend` compares with."""


def kernel_family(compute_capability: tuple[int, int]) -> tuple[bool, ...]:
    """What `choose_backend` asks of the compute capability: devices with equal families trace
    the same attention kernels (the only capability-dependent part of a CUDA trace)."""
    return tuple(compute_capability >= threshold for threshold in _THRESHOLDS)


def traced_alike(
    calls: Iterable[SdpaCall], family: tuple[bool, ...], other: tuple[bool, ...]
) -> bool:
    """Whether a step whose SDPA calls are `calls`, traced for a device of one kernel family
    (`kernel_family`), is the step traced for a device of `other`: every call runs the same
    traced op on both (`traced_kernel`; e.g. bf16 without dropout: Hopper's cuDNN attention and
    Ampere's flash attention trace alike). Only the count of each kernel the trace says it
    chose (`StepTrace.attention`) differs then."""
    mine, theirs = _lowest(family), _lowest(other)
    return all(traced_kernel(call, mine) == traced_kernel(call, theirs) for call in calls)


def _lowest(family: tuple[bool, ...]) -> tuple[int, int]:
    """The lowest compute capability of a kernel family (`traced_kernel` asks of a capability
    only its family)."""
    return max((t for t, above in zip(_THRESHOLDS, family, strict=True) if above), default=(0, 0))


def _cuda_dropout(input: torch.Tensor, p: float, train: bool) -> torch.Tensor:
    """F.dropout as CUDA runs it: `native_dropout`, which keeps a one-byte bool mask.

    NB: the CPU decomposition keeps a mask in the input's dtype (4 bytes an element in fp32).
    """
    if not train or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input * torch.zeros_like(input)
    return aten.native_dropout(input, p, train)[0]


CUDNN_SCRATCH_MAX_SEQ = 1024
"""Query length from which cuDNN's backward was never seen allocating the dropout scratch.

NB: an empirical boundary, not a rule of cuDNN's: in-model allocator traces on the H100
(`benchmarks/accuracy/probe_attention_scratch.py`, results/attention_scratch_h100.json) show the
scratch at 256 and 512 tokens for some models and shapes (GPT-2 at 512, the melody transformer
at 256, a user GPT at 512) but not others (the melody transformer at 512, the user GPT at 256),
and never at 1024 tokens (five models and shapes, up to 2^31 scores in the max-batch
benchmark). cuDNN picks its backward engine by shape; which one is not modelled."""


def _cudnn_dropout_backward_scratch(
    query: torch.Tensor, key: torch.Tensor, out: torch.Tensor
) -> None:
    """Gradient hooks that allocate and free cuDNN's dropout scratch as its backward does.

    NB: on an H100 (torch 2.11, cuDNN 9.19), cuDNN attention's backward with dropout allocates
    a one-byte-per-score buffer (batch x heads x query length x key length) held through the
    kernel, and a transient fp32 buffer of the same shape; both appear in the allocator traces
    of GPT-2 (8 x 12 x 512 x 512) and of the melody transformer (64 x 8 x 256 x 256), and
    neither without dropout (TinyLlama). Here both are allocated when the output's gradient
    arrives (the fp32 one freed at once) and the byte buffer is freed when the query's
    gradient is made. On the GPU the fp32 buffer also overlaps the first gradient output
    (a few MiB), which this ordering leaves out.
    """
    scores = query.shape[:-2].numel() * query.shape[-2] * key.shape[-2]
    held: list[torch.Tensor] = []

    def before(grad: torch.Tensor) -> None:
        with labelled(LIBRARY_OP + "attention_dropout_scratch"):
            held.append(torch.empty(scores, dtype=torch.uint8))
            transient = torch.empty(scores * 4, dtype=torch.uint8)
        del transient

    def after(grad: torch.Tensor) -> None:
        held.clear()

    out.register_hook(before)
    query.register_hook(after)


class CudaAttention:
    """Routes aten.scaled_dot_product_attention to the kernel a CUDA device would use, and
    aten.dropout to CUDA's fused dropout.

    NB: the route is a Python kernel for the op's CompositeImplicitAutograd key, registered for
    the duration of a trace, so it also applies where torch-function modes do not reach (the
    recomputation of checkpointed blocks inside backward). Autocast has cast the inputs by the
    time it runs, as on CUDA.
    """

    def __init__(self, compute_capability: tuple[int, int]) -> None:
        self.capability = compute_capability
        self.chosen: dict[SdpaBackend, int] = {}
        self.calls: set[SdpaCall] = set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[CudaAttention]:
        """Register the routing kernel for the duration of the block."""
        kernels = {"scaled_dot_product_attention": self._sdpa, "dropout": _cuda_dropout}
        with registered("CompositeImplicitAutograd", kernels):
            yield self

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
        mask = "none" if attn_mask is None else "grad" if attn_mask.requires_grad else "plain"
        strided = attn_mask is not None and attn_mask.size(-1) > 1 and attn_mask.stride(-1) != 1
        self.calls.add(
            SdpaCall(
                dtype=query.dtype,
                head_dim=query.shape[-1],
                value_dim=value.shape[-1],
                mask=mask,
                gqa=enable_gqa,
                strided_mask=strided,
                scratch_eligible=dropout_p > 0
                and query.requires_grad
                and query.shape[-2] < CUDNN_SCRATCH_MAX_SEQ,
            )
        )
        if strided:
            # NB: every fused kernel needs a mask whose last dimension is contiguous; T5's
            # permuted position bias is not, and CUDA falls back to the math path (seen on H100)
            backend = SdpaBackend.MATH
        else:
            backend = choose_backend(
                query.dtype, query.shape[-1], value.shape[-1], mask, enable_gqa, self.capability
            )
        self.chosen[backend] = self.chosen.get(backend, 0) + 1
        cudnn = backend is SdpaBackend.CUDNN
        if cudnn:
            # NB: cuDNN attention saves the output and fp32 row statistics, as flash does; its
            # meta kernel is not used, flash's (or, with a mask, memory-efficient's) stands in.
            backend = SdpaBackend.FLASH if attn_mask is None else SdpaBackend.EFFICIENT
        if backend is SdpaBackend.FLASH:
            out = aten._scaled_dot_product_flash_attention(
                query, key, value, dropout_p, is_causal, False, scale=scale
            )[0]
            if (
                cudnn
                and dropout_p > 0
                and out.requires_grad
                and query.requires_grad
                and query.shape[-2] < CUDNN_SCRATCH_MAX_SEQ
            ):
                _cudnn_dropout_backward_scratch(query, key, out)
            return out
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
        return _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _math(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
) -> torch.Tensor:
    """PyTorch's composite math attention (it keeps the attention scores for backward)."""
    return aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa
    )[0]


class MpsAttention:
    """Routes aten.scaled_dot_product_attention to the math path, as PyTorch on an Apple GPU
    runs it in training.

    NB: PyTorch's MPS kernel (`_scaled_dot_product_attention_math_for_mps`) serves only calls
    without gradients and without dropout; training calls take the composite math path, which
    materialises the attention scores (aten/src/ATen/native/transformers/attention.cpp).
    Dropout is not routed: `at::dropout` takes its fused kernel only on CUDA-like devices, so
    on MPS it draws a float mask, as on the CPU.
    """

    def __init__(self) -> None:
        self.chosen: dict[SdpaBackend, int] = {}

    @contextlib.contextmanager
    def installed(self) -> Iterator[MpsAttention]:
        with registered("CompositeImplicitAutograd", {"scaled_dot_product_attention": self._sdpa}):
            yield self

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
        self.chosen[SdpaBackend.MATH] = self.chosen.get(SdpaBackend.MATH, 0) + 1
        return _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
