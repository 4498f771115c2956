"""Which device's rules a traced step follows: a CUDA GPU's, an Apple GPU's (MPS), or stock CPU
PyTorch's.

The traced tensors are fake CPU tensors either way. For a CUDA target the trace injects what
CUDA would do differently (its autocast policy, its attention kernels and fused dropout, the
foreach optimizer path). For the CPU target nothing is injected: the step runs under the real
`torch.autocast("cpu", dtype)`, SDPA and dropout dispatch to their CPU kernels, and the
optimizers take their CPU default (the for-loop path: `_default_to_fused_or_foreach` picks
foreach only for CUDA-like devices). For an Apple GPU (modelled, not checked on one) the trace
injects MPS autocast's op lists, sends attention to the math path and keeps the for-loop
optimizer path and the CPU-style dropout, as PyTorch does on MPS.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import torch

from trainfit.trace.autocast import MPS_POLICY, TargetAutocast
from trainfit.trace.kernels.attention import CudaAttention, MpsAttention, SdpaBackend, SdpaCall
from trainfit.trace.kernels.onednn import onednn_lstm_workspace
from trainfit.training import no_context

if TYPE_CHECKING:
    from trainfit.hardware.catalog import Device


class TargetKind(str, Enum):
    """The family of device a trace is for."""

    CUDA = "cuda"
    CPU = "cpu"
    MPS = "mps"


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """The device a step is traced for."""

    kind: TargetKind = TargetKind.CUDA
    compute_capability: tuple[int, int] = (9, 0)
    """CUDA only: picks the attention kernels and cuBLAS workspace size."""

    @classmethod
    def cuda(cls, compute_capability: tuple[int, int] = (9, 0)) -> Target:
        return cls(kind=TargetKind.CUDA, compute_capability=compute_capability)

    @classmethod
    def cpu(cls) -> Target:
        return cls(kind=TargetKind.CPU, compute_capability=(0, 0))

    @classmethod
    def mps(cls) -> Target:
        return cls(kind=TargetKind.MPS, compute_capability=(0, 0))

    @classmethod
    def of(cls, device: Device) -> Target:
        """The target of a catalog device (kind "cuda", "mps" or "cpu")."""
        if device.kind == "mps":
            return cls.mps()
        if device.kind == "cpu":
            return cls.cpu()
        return cls.cuda(device.compute_capability)

    def rules(self, autocast_dtype: torch.dtype | None) -> TargetRules:
        """The per-trace rules (stateful: they count the attention kernels chosen)."""
        if self.kind is TargetKind.CPU:
            return CpuRules(autocast_dtype)
        if self.kind is TargetKind.MPS:
            return MpsRules(autocast_dtype)
        return CudaRules(autocast_dtype, self.compute_capability)


class TargetRules:
    """What a trace installs for its target, and how the step's autocast region is opened."""

    foreach: bool
    """The optimizer path the target takes by default."""

    def installed(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def attention_chosen(self) -> dict[SdpaBackend, int]:
        raise NotImplementedError

    def attention_calls(self) -> frozenset[SdpaCall]:
        """The distinct SDPA calls the trace routed (empty where nothing is routed)."""
        return frozenset()


class CudaRules(TargetRules):
    """CUDA autocast emulation, CUDA attention routing and the foreach optimizer path."""

    def __init__(self, autocast_dtype: torch.dtype | None, capability: tuple[int, int]) -> None:
        self.emulation = TargetAutocast(autocast_dtype) if autocast_dtype is not None else None
        self.attention = CudaAttention(capability)
        self.foreach = True

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            if self.emulation is not None:
                stack.enter_context(self.emulation.installed())
            stack.enter_context(self.attention.installed())
            yield

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        return self.emulation.region() if self.emulation is not None else no_context()

    def attention_chosen(self) -> dict[SdpaBackend, int]:
        return dict(self.attention.chosen)

    def attention_calls(self) -> frozenset[SdpaCall]:
        return frozenset(self.attention.calls)


class CpuRules(TargetRules):
    """Stock CPU PyTorch: autocast is `torch.autocast("cpu", dtype)`; only oneDNN's LSTM
    workspace, which the meta kernel leaves out, is supplied (`trace/onednn.py`)."""

    def __init__(self, autocast_dtype: torch.dtype | None) -> None:
        self.dtype = autocast_dtype
        self.foreach = False

    def installed(self) -> contextlib.AbstractContextManager[Any]:
        return onednn_lstm_workspace()

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.dtype is None:
            return no_context()
        return torch.autocast("cpu", dtype=self.dtype)

    def attention_chosen(self) -> dict[SdpaBackend, int]:
        # NB: the CPU's own SDPA dispatch runs (its flash kernel or the math path); which one
        # is not counted.
        return {}


class MpsRules(CudaRules):
    """MPS autocast emulation, attention on the math path, the for-loop optimizer path."""

    def __init__(self, autocast_dtype: torch.dtype | None) -> None:
        self.emulation = (
            TargetAutocast(autocast_dtype, MPS_POLICY) if autocast_dtype is not None else None
        )
        self.attention = MpsAttention()  # type: ignore[assignment]
        self.foreach = False

    def attention_calls(self) -> frozenset[SdpaCall]:
        return frozenset()
