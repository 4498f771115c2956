"""CUDA (or MPS) autocast, emulated on a CPU-only build of PyTorch.

`torch.autocast("cuda")` disables itself without CUDA, and CPU autocast casts different ops
(it leaves layer_norm and softmax in bf16, for example). The traced step runs on fake CPU
tensors, which carry the AutocastCPU dispatch key, so for the duration of a trace we register
CUDA's casting policy as Python kernels on that key (and let the CPU-only rules fall through),
then run under `torch.autocast("cpu", dtype)`. The casts happen above autograd exactly where
CUDA autocast makes them, so autograd saves what it would save on the GPU.

Policy lists follow aten/src/ATen/autocast_mode.h (AT_FORALL_LOWER_PRECISION_FP,
AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_PROMOTE) for the CUDA device, and the
hand-written `TORCH_LIBRARY_IMPL(aten, AutocastMPS, m)` block of autocast_mode.cpp for Apple
GPUs (`MPS_POLICY`: fewer ops in lower precision, batch_norm and the reductions cast to fp32).
Like CUDA autocast, casts of fp32 leaf tensors that require grad (parameters) are cached until
the outermost autocast context exits.

Known limitations: ops registered for CUDA autocast by third-party libraries are not known;
`fp32_append_dtype` (norm with dtype) is treated as fp32.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_map

from trainfit.trace.recorder import labelled

LOWER_PRECISION_FP = (
    "_convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_tbc",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "convolution",
    "prelu",
    "addmm",
    "addmv",
    "addr",
    "matmul",
    "einsum",
    "mm",
    "mv",
    "linalg_vecdot",
    "linear",
    "addbmm",
    "baddbmm",
    "bmm",
    "chain_matmul",
    "linalg_multi_dot",
    "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell",
    "lstm_cell",
    "gru_cell",
    "rnn_tanh_cell",
    "rnn_relu_cell",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "scaled_dot_product_attention",
)
FP32 = (
    "acos",
    "asin",
    "cosh",
    "erfinv",
    "exp",
    "expm1",
    "log",
    "log10",
    "log2",
    "log1p",
    "reciprocal",
    "rsqrt",
    "sinh",
    "tan",
    "pow",
    "softplus",
    "layer_norm",
    "native_layer_norm",
    "group_norm",
    "frobenius_norm",
    "nuclear_norm",
    "cosine_similarity",
    "poisson_nll_loss",
    "cosine_embedding_loss",
    "nll_loss",
    "nll_loss2d",
    "hinge_embedding_loss",
    "kl_div",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "mse_loss",
    "margin_ranking_loss",
    "multilabel_margin_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "multi_margin_loss",
    "binary_cross_entropy_with_logits",
    "dist",
    "pdist",
    "cdist",
    "renorm",
    "logsumexp",
    "upsample_nearest1d",
    "_upsample_nearest_exact1d",
    "upsample_nearest2d",
    "_upsample_nearest_exact2d",
    "upsample_nearest3d",
    "_upsample_nearest_exact3d",
    "upsample_linear1d",
    "upsample_bilinear2d",
    "_upsample_bilinear2d_aa",
    "upsample_trilinear3d",
    "upsample_bicubic2d",
    "_upsample_bicubic2d_aa",
    "norm",
)
FP32_SET_OPT_DTYPE = (
    "prod",
    "softmax",
    "log_softmax",
    "cumprod",
    "cumsum",
    "linalg_vector_norm",
    "linalg_matrix_norm",
    "sum",
    "nansum",
)
PROMOTE = (
    "addcdiv",
    "addcmul",
    "atan2",
    "bilinear",
    "cross",
    "dot",
    "vdot",
    "grid_sampler",
    "index_put",
    "tensordot",
    "scatter_add",
    "stack",
    "cat",
)

_NOT_ON_MPS = (
    "conv3d",
    "conv_transpose3d",
    "linalg_vecdot",
    "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell",
    "gru_cell",
    "rnn_tanh_cell",
    "rnn_relu_cell",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
)
MPS_LOWER_PRECISION_FP = tuple(name for name in LOWER_PRECISION_FP if name not in _NOT_ON_MPS)
MPS_FP32 = (
    *(name for name in FP32 if not name.startswith(("upsample", "_upsample", "norm"))),
    "batch_norm",
    # NB: MPS casts its "fp32_set_opt_dtype" ops' inputs to fp32 (the plain fp32 policy)
    *FP32_SET_OPT_DTYPE,
)
MPS_PROMOTE = tuple(name for name in PROMOTE if name not in ("vdot", "stack", "cat"))


@dataclass(frozen=True, slots=True)
class Policy:
    """Which ops an autocast device runs in lower precision, in fp32, or promoted."""

    lower_precision_fp: tuple[str, ...]
    fp32: tuple[str, ...]
    fp32_set_opt_dtype: tuple[str, ...]
    promote: tuple[str, ...]


CUDA_POLICY = Policy(LOWER_PRECISION_FP, FP32, FP32_SET_OPT_DTYPE, PROMOTE)
MPS_POLICY = Policy(MPS_LOWER_PRECISION_FP, MPS_FP32, (), MPS_PROMOTE)

WEIGHT_CAST = "autocast:weight-cast"
"""The op name of a parameter's cached lower-precision copy (it scales with the parameters)."""

_KEY = "AutocastCPU"
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


class TargetAutocast:
    """Installs a target's autocast policy (CUDA's by default) on the AutocastCPU key while
    active."""

    def __init__(self, dtype: torch.dtype, policy: Policy = CUDA_POLICY) -> None:
        self.dtype = dtype
        self.policy = policy
        self._cache: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}
        self._lib: torch.library.Library | None = None
        self._depth = 0

    # -- casting ------------------------------------------------------------------------------

    def _cast(self, value: Any, dtype: torch.dtype, cache: bool) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if value.dtype not in _FLOATS or value.dtype == dtype:
            return value
        if cache and value.dtype == torch.float32 and value.requires_grad and value.is_leaf:
            hit = self._cache.get(id(value))
            if hit is not None and hit[0]() is value:
                return hit[1]
            with labelled(WEIGHT_CAST):
                cast = value.to(dtype)
            self._cache[id(value)] = (weakref.ref(value), cast)
            return cast
        return value.to(dtype)

    def _lower(self, op: Any) -> Callable[..., Any]:
        def kernel(*args: Any, **kwargs: Any) -> Any:
            with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
                args, kwargs = tree_map(lambda v: self._cast(v, self.dtype, True), (args, kwargs))
                return op(*args, **kwargs)

        return kernel

    def _fp32(self, op: Any) -> Callable[..., Any]:
        def kernel(*args: Any, **kwargs: Any) -> Any:
            with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
                args, kwargs = tree_map(
                    lambda v: self._cast(v, torch.float32, False), (args, kwargs)
                )
                return op(*args, **kwargs)

        return kernel

    def _fp32_set_opt_dtype(self, op: Any) -> Callable[..., Any]:
        names = [a.name for a in op._schema.arguments]
        dtype_index = names.index("dtype") if "dtype" in names else None

        def kernel(*args: Any, **kwargs: Any) -> Any:
            with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
                first = args[0] if args else None
                eligible = isinstance(first, torch.Tensor) and first.dtype in (
                    torch.float16,
                    torch.bfloat16,
                )
                if eligible and dtype_index is not None:
                    if len(args) > dtype_index:
                        if args[dtype_index] is None:
                            args = (*args[:dtype_index], torch.float32, *args[dtype_index + 1 :])
                    elif kwargs.get("dtype") is None:
                        kwargs = {**kwargs, "dtype": torch.float32}
                return op(*args, **kwargs)

        return kernel

    def _promote(self, op: Any) -> Callable[..., Any]:
        def kernel(*args: Any, **kwargs: Any) -> Any:
            with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
                dtypes: set[torch.dtype] = set()

                def collect(v: Any) -> Any:
                    if isinstance(v, torch.Tensor) and v.dtype in _FLOATS:
                        dtypes.add(v.dtype)
                    return v

                tree_map(collect, (args, kwargs))
                if len(dtypes) > 1:
                    wide = torch.float32 if torch.float32 in dtypes else self.dtype
                    args, kwargs = tree_map(lambda v: self._cast(v, wide, False), (args, kwargs))
                return op(*args, **kwargs)

        return kernel

    # -- registration -------------------------------------------------------------------------

    def _install(self) -> None:
        lib = torch.library.Library("aten", "IMPL")
        policies = (
            (self.policy.lower_precision_fp, self._lower),
            (self.policy.fp32, self._fp32),
            (self.policy.fp32_set_opt_dtype, self._fp32_set_opt_dtype),
            (self.policy.promote, self._promote),
        )
        ours: set[str] = set()
        with warnings.catch_warnings():
            # NB: overriding the CPU kernels of aten ops on this key warns once per op
            warnings.simplefilter("ignore")
            for names, policy in policies:
                for name in names:
                    packet = getattr(torch.ops.aten, name, None)
                    if packet is None:
                        continue
                    for overload in packet.overloads():
                        if "out" in overload.split("_") or overload.endswith("out"):
                            continue
                        op = getattr(packet, overload)
                        qualified = name if overload == "default" else f"{name}.{overload}"
                        lib.impl(qualified, policy(op), _KEY)
                        ours.add(f"aten::{qualified}")
            for registered in torch._C._dispatch_get_registrations_for_dispatch_key(_KEY):
                if registered.startswith("aten::") and registered not in ours:
                    lib.impl(registered[len("aten::") :], torch.library.fallthrough_kernel, _KEY)
        self._lib = lib

    @contextlib.contextmanager
    def region(self) -> Iterator[None]:
        """The equivalent of `with torch.autocast("cuda", dtype):` (or "mps") for fake CPU
        tensors."""
        self._depth += 1
        try:
            with torch.autocast("cpu", dtype=self.dtype, cache_enabled=False):
                yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                # NB: CUDA autocast clears its cast cache when the outermost context exits
                self._cache.clear()

    @contextlib.contextmanager
    def installed(self) -> Iterator[TargetAutocast]:
        """Register the policy kernels for the duration of the block."""
        self._install()
        # NB: CUDA autocast frees its cast cache whenever the outermost autocast context exits,
        # including the contexts torch.utils.checkpoint enters to recompute a block in
        # backward; torch.autocast.__exit__ calls torch.clear_autocast_cache() then.
        original = torch.clear_autocast_cache

        def clear() -> None:
            original()
            self._cache.clear()

        torch.clear_autocast_cache = clear
        try:
            yield self
        finally:
            torch.clear_autocast_cache = original
            if self._lib is not None:
                self._lib._destroy()
                self._lib = None
