"""cuDNN's recurrent layers (LSTM, GRU, RNN_TANH, RNN_RELU) as a CUDA device runs them, for
traces on fake CPU tensors.

On the CPU, `nn.LSTM`, `nn.GRU` and `nn.RNN` run PyTorch's decomposition into per-step cells,
which saves every gate of every step. On CUDA they run `_cudnn_rnn`, whose memory is quite
different: one flat weight buffer (the parameters are views into it, made by
`flatten_parameters` when the module is moved to the GPU), a reserve space kept from forward to
backward, transient workspaces, one flat weight-gradient buffer (the parameters' gradients are
views into it), and one cuDNN dropout state per process. torch's meta kernel for `_cudnn_rnn`
allocates no reserve and no workspace, and `_cudnn_rnn_backward` has none; so for the duration
of a trace a kernel on the AutogradCPU key of `lstm.input`, `gru.input`, `rnn_tanh.input` and
`rnn_relu.input` runs an autograd.Function that allocates what cuDNN allocates, in its order,
and charges the fused kernel's cost.

Sizes and order come from the allocator's event traces on an H100 (torch 2.11, cuDNN 9.19):
`benchmarks/accuracy/results/cudnn_probe_h100.json.gz` (written by
`benchmarks/accuracy/probe_cudnn.py`) and `cudnn_lstm_grid_h100.json.gz` (an earlier grid);
`benchmarks/accuracy/fit_cudnn.py` (LSTM) and `fit_cudnn_rnn.py` (GRU, RNN) check them.

Known limitations: packed sequences (`*.data` overloads) and fp64 recurrent layers are not
emulated: tracing one on a CUDA target raises a TraceError naming the module (cuDNN runs both;
the CPU decomposition's memory would be silently wrong). An LSTM with `proj_size` has no probe
data: NB its reserve space is derived from cuDNN's layout (the projected output takes the hidden
output's place), not measured, and its workspace is the LSTM fit's at the hidden size. The
workspace size is a fit (see `workspace_bytes`): for LSTM off by 25% for a typical shape and by
up to 2x; GRU and RNN are the LSTM fit times a ratio per mode (GRU -39%..+26% on its 7 probes,
RNN -16%..+76%). RNN_RELU has no probe of its own: it is taken as RNN_TANH (the same cuDNN
layout, another activation). Under autocast the per-parameter fp32 gradient casts are modelled,
the half-precision workspace by a constant ratio. The step time reuses the LSTM's per-step
calibration for every mode (the GRU and RNN steps measured on an H100 were within -2%..+21% of
it), the projected LSTM's scaled (see `_PROJ_STEP_RATIO`).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

import torch
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes

from trainfit.errors import TraceError
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
_PROJ_STEP_RATIO = 1.5
"""An LSTM with `proj_size` takes this many times the LSTM's time per recurrent step (the
projection's GEMM after each step's gates).

NB: fitted on the one measured projected LSTM (H100, fp32, I256 H512 P128 L2 B64 T256: 36.7 ms
a step, 24.1 ms predicted at one LSTM step each); cuDNN runs projections only with its standard
algorithm."""


class RnnMode(str, Enum):
    """cuDNN's cell types, named as `nn.RNNBase.mode` names them."""

    LSTM = "LSTM"
    GRU = "GRU"
    RNN_TANH = "RNN_TANH"
    RNN_RELU = "RNN_RELU"


@dataclass(frozen=True, slots=True)
class _Layout:
    """How one mode lays out its weights, reserve space and workspace."""

    gates: int
    """Gate matrices stacked in `weight_ih` and `weight_hh` (4 LSTM, 3 GRU, 1 RNN)."""
    reserve_states: int
    """Hidden-sized buffers per layer, step and sample in the reserve space, besides the
    layer's output."""
    workspace_ratio: float
    """The workspace over the LSTM fit's at the same shape."""


# NB: reserve states read off the allocator traces (see `reserve_bytes`): LSTM keeps its 4 gates
# and the cell state; GRU 6, the input and the recurrent pre-activations of its 3 gates apart
# (the candidate gate multiplies only the recurrent part by the reset gate); RNN its one
# pre-activation. Workspace ratios: median measured/LSTM-fit over the 7 probes of each mode
# (GRU 0.65-1.36, RNN 0.58-1.21), see `benchmarks/accuracy/fit_cudnn_rnn.py`.
_LAYOUTS = {
    RnnMode.LSTM: _Layout(gates=4, reserve_states=5, workspace_ratio=1.0),
    RnnMode.GRU: _Layout(gates=3, reserve_states=6, workspace_ratio=0.82),
    RnnMode.RNN_TANH: _Layout(gates=1, reserve_states=1, workspace_ratio=1.02),
    RnnMode.RNN_RELU: _Layout(gates=1, reserve_states=1, workspace_ratio=1.02),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class RnnShape:
    """What sizes cuDNN's buffers for one recurrent call."""

    mode: RnnMode = RnnMode.LSTM
    input_size: int
    hidden: int
    proj: int = 0
    """LSTM's `proj_size` (0: none); cuDNN projects only LSTMs."""
    layers: int
    directions: int
    seq: int
    batch: int
    element: int
    """Bytes per element of the compute dtype."""
    dropout: float

    @property
    def out(self) -> int:
        """Each direction's output width: the projection if any, else the hidden size."""
        return self.proj or self.hidden


def reserve_bytes(s: RnnShape) -> int:
    """cuDNN's reserve space for training (`cudnnGetRNNTempSpaceSizes`).

    Per layer, direction, step and sample: the mode's states (`_Layout.reserve_states` hidden-
    sized buffers) and the layer's output, less the last layer's output (it is `y`); plus one
    bit per element of every layer's dropped input, each layer's mask rounded to 16 bytes, plus
    256 bytes.

    NB: exact on all 40 probed LSTMs (fp32, bf16, fp16, one and two directions, 1-5 layers) and
    on all 14 probed GRUs and RNNs (1-3 layers, one and two directions, with and without
    dropout). With `proj_size` there is no probe: the projected output takes the hidden
    output's place, from cuDNN's documented layout (`CUDNN_LSTM` with `projSize`), unverified.
    """
    states = _LAYOUTS[s.mode].reserve_states
    per_sample = s.layers * (states * s.hidden + s.out) - s.out
    core = per_sample * s.directions * s.seq * s.batch * s.element
    mask = 0
    if s.dropout > 0 and s.layers > 1:
        bits = s.seq * s.batch * s.directions * s.out
        per_layer = math.ceil(bits / 8 / RESERVE_ALIGN) * RESERVE_ALIGN
        mask = s.directions * (s.layers - 1) * per_layer
    return core + mask + 256


def workspace_bytes(s: RnnShape) -> int:
    """cuDNN's transient workspace for one forward or backward pass (a fit, see the NB above);
    GRU and RNN scale the LSTM fit by their `_Layout.workspace_ratio`.

    NB: with `proj_size` the LSTM fit at the hidden size is used (no probe)."""
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
    return int(size * _LAYOUTS[s.mode].workspace_ratio)


def rnn_cost(s: RnnShape, backward: bool) -> OpCost:
    """What cuDNN's fused recurrent kernel costs: the gate matmuls, 2*gates*H*(in+out) FLOPs per
    step, sample, layer and direction, plus 2*H*P for an LSTM's projection (backward: data and
    weight passes, twice that); one recurrent kernel per time step, layer and direction; bytes:
    input, output, weights and the reserve; detail: the recurrent weight's elements (gates x H
    x output size), which decide whether cuDNN's persistent kernel holds them on chip."""
    gates = _LAYOUTS[s.mode].gates
    flops = 0
    weights = 0
    for layer in range(s.layers):
        width = s.input_size if layer == 0 else s.out * s.directions
        per = gates * s.hidden * (width + s.out) + (s.hidden * s.proj)
        flops += 2 * s.seq * s.batch * per * s.directions
        weights += (per + 2 * gates * s.hidden) * s.directions
    passes = 2 if backward else 1
    moved = s.element * (
        s.seq * s.batch * (s.input_size + s.out * s.directions) * (2 if backward else 1)
        + weights * passes
    ) + reserve_bytes(s)
    steps = s.seq * s.layers * s.directions
    if s.proj:
        steps = math.ceil(steps * _PROJ_STEP_RATIO)
    return OpCost(
        OpKind.RNN,
        "fp32" if s.element == 4 else "bf16",
        flops * passes,
        moved,
        steps,
        gates * s.hidden * s.out,
        layers=s.layers * s.directions,
        gates=gates,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Call:
    """One emulated `_cudnn_rnn` call."""

    shape: RnnShape
    train: bool
    batch_first: bool
    emulator: CudnnLstm


class _CudnnRnnFunction(torch.autograd.Function):
    """Allocates what `_cudnn_rnn` and `_cudnn_rnn_backward` allocate, in their order (an LSTM's
    cell state `c0` beside `h0`; None for GRU and RNN)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        call: _Call,
        x: torch.Tensor,
        h0: torch.Tensor,
        c0: torch.Tensor | None,
        *weights: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        s = call.shape
        xc = _time_major(x, call.batch_first)
        y = x.new_empty((s.seq, s.batch, s.directions * s.out))
        hy = h0.new_empty(h0.shape)
        cy = c0.new_empty(c0.shape) if c0 is not None else None
        ws = call.emulator.workspace(x, workspace_bytes(s))
        reserve = x.new_empty((reserve_bytes(s) if call.train else 0,), dtype=torch.uint8)
        del ws, xc
        call.emulator.recorder.charge(rnn_cost(s, backward=False))
        ctx.call = call
        ctx.weight_shapes = [w.shape for w in weights]
        ctx.has_cell = c0 is not None
        ctx.save_for_backward(x, h0, c0, y, reserve)
        out = y.transpose(0, 1) if call.batch_first else y
        return out, hy, cy

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, dout: torch.Tensor, dhy: torch.Tensor, dcy: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, ...]:
        call: _Call = ctx.call
        s = call.shape
        x, h0, c0, _y, _reserve = ctx.saved_tensors
        # data pass (`_cudnn_rnn_backward_input`)
        xc = _time_major(x, call.batch_first)
        dyc = _time_major(dout, call.batch_first)
        dx = x.new_empty((s.seq, s.batch, s.input_size))
        dhx = h0.new_empty(h0.shape)
        dcx = c0.new_empty(c0.shape) if ctx.has_cell else None
        ws = call.emulator.workspace(x, workspace_bytes(s))
        del ws, dyc, xc
        # weight pass (`_cudnn_rnn_backward_weight`): one flat buffer; the gradients are views
        xc = _time_major(x, call.batch_first)
        total = sum(math.prod(shape) for shape in ctx.weight_shapes)
        dw = x.new_zeros((total,))
        ws = call.emulator.workspace(x, workspace_bytes(s))
        del ws, xc
        call.emulator.recorder.charge(rnn_cost(s, backward=True))
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
    """Routes every cuDNN recurrent op (`lstm`, `gru`, `rnn_tanh`, `rnn_relu`) to an emulation of
    cuDNN's kernel and flattens the weights of `nn.LSTM`, `nn.GRU` and `nn.RNN`.

    NB: the routes are Python kernels on the AutogradCPU key of the ops' `input` overloads,
    registered for the duration of a trace, so they also apply inside checkpoint recomputation.
    What they do not emulate (packed sequences: the `data` overloads; fp64; input not 3-D)
    raises a TraceError naming the module rather than falling back to the CPU decomposition.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.calls = 0
        self._dropout_state: torch.Tensor | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[CudnnLstm]:
        """Register the routing kernels for the duration of the block."""
        kernels: dict[str, Any] = {
            "lstm.input": self._lstm,
            "gru.input": functools.partial(self._single_state, RnnMode.GRU),
            "rnn_tanh.input": functools.partial(self._single_state, RnnMode.RNN_TANH),
            "rnn_relu.input": functools.partial(self._single_state, RnnMode.RNN_RELU),
        }
        for op in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
            kernels[f"{op}.data"] = functools.partial(self._packed, op)
        try:
            with registered("AutogradCPU", kernels):
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
        h0, c0 = hx
        out, hy, cy = self._run(
            RnnMode.LSTM, input, h0, c0, params, num_layers, dropout, train, bidirectional,
            batch_first,
        )  # fmt: skip
        return out, hy, cast(torch.Tensor, cy)  # an LSTM's cell state

    def _single_state(
        self,
        mode: RnnMode,
        input: torch.Tensor,
        hx: torch.Tensor,
        params: list[torch.Tensor],
        has_biases: bool,
        num_layers: int,
        dropout: float,
        train: bool,
        bidirectional: bool,
        batch_first: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out, hy, _ = self._run(
            mode, input, hx, None, params, num_layers, dropout, train, bidirectional, batch_first
        )
        return out, hy

    def _packed(self, op: str, *args: Any) -> Any:
        raise TraceError(
            f"{self._where()}: cuDNN's {op} over a packed sequence (PackedSequence) is not "
            "emulated; pad the batch instead, or measure this model on the device "
            "(trainfit measure)"
        )

    def _where(self) -> str:
        path = self.recorder.module_path
        return f"module {path!r}" if path else "a recurrent op"

    def _run(
        self,
        mode: RnnMode,
        input: torch.Tensor,
        h0: torch.Tensor,
        c0: torch.Tensor | None,
        params: list[torch.Tensor],
        num_layers: int,
        dropout: float,
        train: bool,
        bidirectional: bool,
        batch_first: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        if input.dim() != 3 or input.dtype == torch.float64:
            what = "fp64" if input.dtype == torch.float64 else f"{input.dim()}-D input"
            raise TraceError(
                f"{self._where()}: cuDNN's {mode.value} with {what} is not emulated; use fp32, "
                "bf16 or fp16 with (batch, seq, features) input, or measure this model on the "
                "device (trainfit measure)"
            )
        if torch.is_autocast_enabled("cpu"):
            dtype = torch.get_autocast_dtype("cpu")
            input, h0 = input.to(dtype), h0.to(dtype)
            c0 = c0.to(dtype) if c0 is not None else None
            params = list(_CastFlatWeights.apply(dtype, *params))
        shape = RnnShape(
            mode=mode,
            input_size=input.shape[-1],
            hidden=c0.shape[-1] if c0 is not None else h0.shape[-1],
            proj=h0.shape[-1] if c0 is not None and h0.shape[-1] != c0.shape[-1] else 0,
            layers=num_layers,
            directions=2 if bidirectional else 1,
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
        return _CudnnRnnFunction.apply(call, input, h0, c0, *params)


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
    """Whether cuDNN's recurrent kernel is emulated for this module (its weights flattened)."""
    return isinstance(module, nn.RNNBase) and module.mode in RnnMode.__members__
