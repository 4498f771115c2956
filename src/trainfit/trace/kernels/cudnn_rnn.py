"""cuDNN's LSTM as a CUDA device runs it, for traces on fake CPU tensors.

On the CPU, `nn.LSTM` runs PyTorch's decomposition into per-step cells, which saves every
gate of every step. On CUDA it runs `_cudnn_rnn`, whose memory is quite different: one flat
weight buffer (the parameters are views into it, made by `flatten_parameters` when the module
is moved to the GPU), a reserve space kept from forward to backward, transient workspaces, one
flat weight-gradient buffer (the parameters' gradients are views into it), and one cuDNN
dropout state per process. torch's meta kernel for `_cudnn_rnn` allocates no reserve and no
workspace, and `_cudnn_rnn_backward` has none; so for the duration of a trace a kernel on the
AutogradCPU key runs an autograd.Function that allocates what cuDNN allocates, in its order.

Sizes and order come from the allocator's event traces on an H100 (torch 2.11, cuDNN 9.19):
`benchmarks/accuracy/results/cudnn_probe_h100.json.gz` (written by
`benchmarks/accuracy/probe_cudnn.py`) and `cudnn_lstm_grid_h100.json.gz` (an earlier grid).

Known limitations: only `nn.LSTM` without `proj_size` on padded (not packed) input is
emulated; GRU and RNN, packed sequences and projections take the CPU decomposition. The
workspace size is a fit (see `workspace_bytes`), off by 25% for a typical shape and by up to
2x; under autocast the per-parameter fp32 gradient casts are modelled, the half-precision
workspace by a constant ratio.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes

from trainfit.trace.compat import registered
from trainfit.trace.costs import OpCost, OpKind
from trainfit.trace.recorder import LIBRARY_OP, Event, Recorder

aten = torch.ops.aten

DROPOUT_STATE_BYTES = 6_488_064
"""cuDNN's dropout state (`cudnnDropoutGetStatesSize`), one per device and process.

NB: seen on an H100 (132 SMs, 48 KiB each) with cuDNN 9.19 in the allocator trace of
`lstm-cudnn-fp32`; it scales with the SM count, other GPUs reuse the H100's size.
"""

RESERVE_ALIGN = 16
"""Each layer's dropout bit mask in the reserve space is rounded up to 16 bytes."""

# NB: fitted by `benchmarks/accuracy/fit_cudnn.py` on 24 single-direction fp32 LSTMs of the two
# probe grids (the two at the accuracy case's shape, B32 T256 I=H=256 L4, left out): log W = c0 +
# sum(c_i log x_i) + c_p [dropout > 0]. Leave-one-out error: median 28%, max -64%/+128%
# (cuDNN switches algorithms with the hidden size; H <= 192 needs more than H = 256).
# Range of the grid: B 4-128, T 50-1000, H 64-1024, I 64-1024, L 1-5.
_WS_LOG_C0 = 12.0906
_WS_EXP = {"batch": 0.4883, "seq": 0.4846, "hidden": 0.3177, "layers": 0.1488, "input": 0.0379}
_WS_DROPOUT = -0.0535
_WS_BIDIRECTIONAL = 2.16
"""NB: median ratio bidirectional/unidirectional over 5 probe shapes (1.46-2.26)."""
_WS_HALF = 0.66
"""NB: median ratio fp16-or-bf16/fp32 over 9 probe pairs (0.53-0.95)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LstmShape:
    """What sizes cuDNN's buffers for one LSTM call."""

    input_size: int
    hidden: int
    layers: int
    directions: int
    seq: int
    batch: int
    element: int
    """Bytes per element of the compute dtype."""
    dropout: float


def reserve_bytes(s: LstmShape) -> int:
    """cuDNN's reserve space for training (`cudnnGetRNNTempSpaceSizes`).

    NB: read off the allocator traces; exact on all 40 probed LSTMs (fp32, bf16, fp16, one and
    two directions, 1-5 layers): six gate-sized buffers per layer and step, less one, plus one
    bit per element of every layer's dropped input, plus 256 bytes.
    """
    core = (6 * s.layers - 1) * s.directions * s.seq * s.batch * s.hidden * s.element
    mask = 0
    if s.dropout > 0 and s.layers > 1:
        bits = s.seq * s.batch * s.directions * s.hidden
        per_layer = math.ceil(bits / 8 / RESERVE_ALIGN) * RESERVE_ALIGN
        mask = s.directions * (s.layers - 1) * per_layer
    return core + mask + 256


def workspace_bytes(s: LstmShape) -> int:
    """cuDNN's transient workspace for one forward or backward pass (a fit, see the NB above)."""
    log_w = (
        _WS_LOG_C0
        + _WS_EXP["batch"] * math.log(s.batch)
        + _WS_EXP["seq"] * math.log(s.seq)
        + _WS_EXP["hidden"] * math.log(s.hidden)
        + _WS_EXP["layers"] * math.log(s.layers)
        + _WS_EXP["input"] * math.log(s.input_size)
        + (_WS_DROPOUT if s.dropout > 0 else 0.0)
    )
    size = math.exp(log_w)
    if s.directions == 2:
        size *= _WS_BIDIRECTIONAL
    if s.element == 2:
        size *= _WS_HALF
    return int(size)


def lstm_cost(s: LstmShape, backward: bool) -> OpCost:
    """What cuDNN's LSTM costs: the gate matmuls, 2*4H*(in+H) FLOPs per step, sample, layer
    and direction (backward: data and weight passes, twice that); one recurrent kernel per
    time step, layer and direction; bytes: input, output, weights and the reserve."""
    flops = 0
    weights = 0
    for layer in range(s.layers):
        width = s.input_size if layer == 0 else s.hidden * s.directions
        per = 4 * s.hidden * (width + s.hidden)
        flops += 2 * s.seq * s.batch * per * s.directions
        weights += (per + 8 * s.hidden) * s.directions
    passes = 2 if backward else 1
    moved = s.element * (
        s.seq * s.batch * (s.input_size + s.hidden * s.directions) * (2 if backward else 1)
        + weights * passes
    ) + reserve_bytes(s)
    return OpCost(
        OpKind.RNN,
        "fp32" if s.element == 4 else "bf16",
        flops * passes,
        moved,
        s.seq * s.layers * s.directions,
        s.hidden,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Call:
    """One emulated `_cudnn_rnn` call."""

    shape: LstmShape
    train: bool
    batch_first: bool
    emulator: CudnnLstm


class _CudnnLstmFunction(torch.autograd.Function):
    """Allocates what `_cudnn_rnn` and `_cudnn_rnn_backward` allocate, in their order."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        call: _Call,
        x: torch.Tensor,
        h0: torch.Tensor,
        c0: torch.Tensor,
        *weights: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = call.shape
        xc = _time_major(x, call.batch_first)
        y = x.new_empty((s.seq, s.batch, s.directions * s.hidden))
        hy = h0.new_empty(h0.shape)
        cy = c0.new_empty(c0.shape)
        ws = call.emulator.workspace(x, workspace_bytes(s))
        reserve = x.new_empty((reserve_bytes(s) if call.train else 0,), dtype=torch.uint8)
        del ws, xc
        call.emulator.recorder.charge(lstm_cost(s, backward=False))
        ctx.call = call
        ctx.weight_shapes = [w.shape for w in weights]
        ctx.save_for_backward(x, h0, c0, y, reserve)
        out = y.transpose(0, 1) if call.batch_first else y
        return out, hy, cy

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, dout: torch.Tensor, dhy: torch.Tensor, dcy: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        call: _Call = ctx.call
        s = call.shape
        x, h0, c0, _y, _reserve = ctx.saved_tensors
        # data pass (`_cudnn_rnn_backward_input`)
        xc = _time_major(x, call.batch_first)
        dyc = _time_major(dout, call.batch_first)
        dx = x.new_empty((s.seq, s.batch, s.input_size))
        dhx = h0.new_empty(h0.shape)
        dcx = c0.new_empty(c0.shape)
        ws = call.emulator.workspace(x, workspace_bytes(s))
        del ws, dyc, xc
        # weight pass (`_cudnn_rnn_backward_weight`): one flat buffer; the gradients are views
        xc = _time_major(x, call.batch_first)
        total = sum(math.prod(shape) for shape in ctx.weight_shapes)
        dw = x.new_zeros((total,))
        ws = call.emulator.workspace(x, workspace_bytes(s))
        del ws, xc
        call.emulator.recorder.charge(lstm_cost(s, backward=True))
        grads: list[torch.Tensor] = []
        offset = 0
        for shape in ctx.weight_shapes:
            n = math.prod(shape)
            grads.append(dw[offset : offset + n].view(shape))
            offset += n
        del dw
        dx_out = dx.transpose(0, 1) if call.batch_first else dx
        return (None, dx_out, dhx, dcx, *grads)


def _time_major(t: torch.Tensor, batch_first: bool) -> torch.Tensor:
    """The (T, B, F) contiguous tensor cuDNN reads (a copy unless already laid out so)."""
    return (t.transpose(0, 1) if batch_first else t).contiguous()


class CudnnLstm:
    """Routes `aten::lstm.input` to an emulation of cuDNN's LSTM and flattens LSTM weights.

    NB: the route is a Python kernel on the AutogradCPU key of `lstm.input`, registered for the
    duration of a trace, so it also applies inside checkpoint recomputation; anything it does not
    emulate falls back to the op's own CPU decomposition.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.calls = 0
        self._dropout_state: torch.Tensor | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[CudnnLstm]:
        """Register the routing kernel for the duration of the block."""
        try:
            with registered("AutogradCPU", {"lstm.input": self._lstm}):
                yield self
        finally:
            self._dropout_state = None

    def flatten_weights(self, module: nn.Module) -> Iterator[torch.Tensor]:
        """As `module.to("cuda")` does for an LSTM: copy its weights into one flat buffer and
        make them views of it. Yields the buffer (after the weights it replaces)."""
        if not _emulated(module):
            return
        weights: list[torch.Tensor] = list(module._flat_weights)  # type: ignore[arg-type]
        if not weights or any(w is None for w in weights):
            return
        recorder = self.recorder
        old_keys = {recorder.key_of(w) for w in weights} - {None}
        total = sum(w.numel() for w in weights)
        # NB: the parameters are meta tensors that FakeTensorMode converts on use; their storage
        # is swapped outside the modes, as `_cudnn_rnn_flatten_weight` swaps it on the GPU. The
        # frees are recorded here, not left to the storages' deaths (FakeTensorMode's memo of
        # converted parameters outlives them).
        with _disable_current_modes(), torch.no_grad():
            flat = torch.empty((total,), dtype=weights[0].dtype, device=weights[0].device)
            offset = 0
            for w in weights:
                w.set_(flat.untyped_storage(), offset, w.shape, w.stride())
                offset += w.numel()
        yield flat  # the caller records it as a parameter
        flat_key = recorder.key_of(flat)
        if flat_key is not None:
            recorder.disown(flat_key)  # lives as long as the model
        for key in sorted(old_keys):
            recorder.disown(key)
            recorder.events.append(self._event(key, 0, "free"))

    def workspace(self, like: torch.Tensor, nbytes: int) -> torch.Tensor:
        """A cuDNN workspace of `nbytes`, recorded under op "cudnn:workspace"."""
        return self._library(like, nbytes, "workspace")

    def _library(self, like: torch.Tensor, nbytes: int, what: str) -> torch.Tensor:
        recorder = self.recorder
        with recorder.silent():
            tensor = like.new_empty((nbytes,), dtype=torch.uint8)
        key = recorder.new_key()
        recorder.events.append(self._event(key, nbytes, LIBRARY_OP + what))
        recorder.adopt(tensor, key)
        return tensor

    def _event(self, key: int, nbytes: int, op: str) -> Event:
        """An allocation (nbytes > 0) or free event at the recorder's current position."""
        recorder = self.recorder
        return Event(
            key=key,
            nbytes=nbytes,
            alloc=nbytes > 0,
            phase=recorder.phase,
            iteration=recorder.iteration,
            op=op,
        )

    def _lstm(
        self,
        input: torch.Tensor,
        hx: list[torch.Tensor],
        params: list[torch.Tensor],
        has_biases: bool,
        num_layers: int,
        dropout: float,
        train: bool,
        bidirectional: bool,
        batch_first: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        args = (input, hx, params, has_biases, num_layers, dropout, train, bidirectional)
        h0, c0 = hx
        directions = 2 if bidirectional else 1
        if input.dim() != 3 or h0.shape[-1] != c0.shape[-1] or input.dtype == torch.float64:
            return aten.lstm.input.decompose(*args, batch_first)
        if torch.is_autocast_enabled("cpu"):
            dtype = torch.get_autocast_dtype("cpu")
            input, h0, c0 = (t.to(dtype) for t in (input, h0, c0))
            params = list(_CastFlatWeights.apply(dtype, *params))
        shape = LstmShape(
            input_size=input.shape[-1],
            hidden=h0.shape[-1],
            layers=num_layers,
            directions=directions,
            seq=input.shape[1] if batch_first else input.shape[0],
            batch=input.shape[0] if batch_first else input.shape[1],
            element=input.element_size(),
            dropout=dropout if train else 0.0,
        )
        if train and dropout > 0 and self._dropout_state is None:
            # NB: PyTorch seeds cuDNN's dropout state from an 8-byte tensor, then keeps the
            # state for the life of the process (aten/src/ATen/native/cudnn/RNN.cpp)
            seed = input.new_empty((), dtype=torch.int64)
            del seed
            self._dropout_state = self._library(input, DROPOUT_STATE_BYTES, "dropout_state")
        self.calls += 1
        call = _Call(shape=shape, train=train, batch_first=batch_first, emulator=self)
        out, hy, cy = _CudnnLstmFunction.apply(call, input, h0, c0, *params)
        return out, hy, cy


class _CastFlatWeights(torch.autograd.Function):
    """Autocast's `_cudnn_rnn_cast_reflatten`: the weights copied into one new flat buffer of
    the lower precision; backward casts each weight's gradient back on its own."""

    @staticmethod
    def forward(ctx: Any, dtype: torch.dtype, *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        total = sum(w.numel() for w in weights)
        flat = weights[0].new_empty((total,), dtype=dtype)
        ctx.dtypes = [w.dtype for w in weights]
        views = []
        offset = 0
        for w in weights:
            views.append(flat[offset : offset + w.numel()].view(w.shape))
            offset += w.numel()
        return tuple(views)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        return (None, *(g.to(dt) for g, dt in zip(grads, ctx.dtypes, strict=True)))


def _emulated(module: nn.Module) -> bool:
    """Whether cuDNN's LSTM is emulated for this module."""
    return isinstance(module, nn.LSTM) and not getattr(module, "proj_size", 0)
