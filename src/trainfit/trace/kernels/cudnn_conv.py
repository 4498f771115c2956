"""cuDNN's convolution workspaces as a CUDA device allocates them, for traces on fake tensors.

On CUDA every convolution asks cuDNN for a workspace, which PyTorch allocates through its
caching allocator and frees as soon as the kernel is queued: in forward right after the output,
in backward right after the input's gradient and again right after the weight's gradient (on
the autograd thread). They barely move peak *allocated* memory, but a workspace of hundreds of
MiB makes the allocator create segments that later tensors then share or do not fit in, so
they move peak *reserved* memory. torch's meta kernels allocate no workspace; for the duration
of a trace a kernel on the AutogradCPU key of `aten::convolution` runs an autograd.Function
that calls the convolution (and, in backward, `convolution_backward` one output at a time)
below autograd and records each workspace as an allocation and a free, op "cudnn:workspace".

Sizes come from the allocator's event traces of 600 random convolutions probed on an H100
(torch 2.11, cuDNN 9.19, `benchmark=False`): `benchmarks/accuracy/results/cudnn_probe_h100.json.gz`
(written by `benchmarks/accuracy/probe_cudnn.py`, analysed by `fit_cudnn_conv.py` there).
No accuracy case's convolution shape and no batch of 64 is in that grid.

Known limitations: which algorithm cuDNN's heuristics pick (and so whether a call takes a
workspace at all) is not modelled, only its most common outcome per kind of convolution: small
dense convolutions that take none on the GPU get one here, and the pointwise convolutions that
do take one (many channels, small images) get none. Sizes are cuDNN 9.19's on Hopper; other GPUs
reuse them. `cudnn.benchmark=True` (which tries algorithms with their own workspaces), 3-D and
dilated convolutions are not probed.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from trainfit.trace.compat import registered
from trainfit.trace.kernels.cudnn_rnn import LIBRARY_OP
from trainfit.trace.recorder import Event, Recorder

aten = torch.ops.aten

WORKSPACE_OP = LIBRARY_OP + "workspace"

TRANSFORM_SLACK = 16
"""NB: the transform workspace is the tensors' bytes plus 16 (exact on most probed calls; a
few are 131 bytes larger still)."""

HALF_CHANNEL_ALIGN = 8
"""NB: for fp16/bf16, the transformed input and weight have their input channels padded to a
multiple of 8 (tensor-core layouts): a 3-channel image costs 8 channels' worth."""

SMALL_KERNEL = 3
"""NB: a forward convolution over fewer than 8 input channels with a kernel no wider than
this mostly takes no workspace (see `forward_workspace_bytes`)."""

WEIGHT_GRAD_SPLIT = 1.037
"""NB: median ratio of the weight-gradient workspace to the transform size over the 333 dense
(not pointwise, not depthwise) probed calls above 1 MiB (`fit_cudnn_conv.py`); the extra is fp32
partial weight gradients, 0 to hundreds of weight copies depending on cuDNN's split."""

POINTWISE_WEIGHT_GRAD_ACCUM = 4
"""Bytes per weight element and batch sample of a pointwise convolution's weight-gradient
workspace (one fp32 partial gradient per sample)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvShape:
    """What sizes cuDNN's workspaces for one convolution call."""

    batch: int
    in_channels: int
    input_numel: int
    """Elements of the input tensor."""
    output_numel: int
    weight_shape: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    groups: int
    transposed: bool
    element: int
    """Bytes per element of the compute dtype."""

    @property
    def kernel_numel(self) -> int:
        return math.prod(self.weight_shape[2:])

    @property
    def pointwise(self) -> bool:
        """A 1x1 (or size-1) kernel at stride 1 without padding: a plain matrix product."""
        return (
            self.kernel_numel == 1
            and all(s == 1 for s in self.stride)
            and all(p == 0 for p in self.padding)
        )

    @property
    def depthwise(self) -> bool:
        return self.groups > 1


def _transform_bytes(s: ConvShape) -> int:
    """Bytes of the input, output and (unless 1x1) weight in cuDNN's transformed layout.

    NB: on the probe grid the workspace of a dense, non-pointwise convolution is, for most
    calls, exactly what it takes to hold the input, the output and the weight in the layout the
    chosen kernel wants (the input's channels padded to 8 for fp16/bf16); a 1x1 kernel's weight
    needs no transform. On the 600-call grid (`fit_cudnn_conv.py`): median error 0%, within 20%
    for 91% of the 297 dense forward calls above 1 MiB.
    """
    channels = s.in_channels
    if s.element == 2:
        channels = math.ceil(channels / HALF_CHANNEL_ALIGN) * HALF_CHANNEL_ALIGN
    x = s.input_numel // s.in_channels * channels * s.element
    y = s.output_numel * s.element
    w = 0
    if s.kernel_numel > 1:
        # a transposed convolution's weight is (in, out / groups, ...): no channel padding
        weight_channels = s.weight_shape[1] if s.transposed else channels
        w = math.prod(s.weight_shape) // s.weight_shape[1] * weight_channels * s.element
    return x + y + w + TRANSFORM_SLACK


def forward_workspace_bytes(s: ConvShape) -> int:
    """cuDNN's workspace for the forward call.

    NB: none for depthwise (grouped) and pointwise convolutions (all 74 and 83 of 87 probed
    calls take none or under 64 KiB) and for a kernel of at most 3x3 over fewer than 8 input
    channels (an image or a spectrogram: 25 of 30 probed calls take none, the 5 that take one
    are under 25 MiB; with a larger kernel 5 of 10 take one), otherwise the transform size
    (`_transform_bytes`). All forward calls (`fit_cudnn_conv.py`): none-or-not right for 90%;
    of the 301 over 1 MiB, median error 0%, within 20% for 90%.
    """
    if s.depthwise or s.pointwise:
        return 0
    if s.in_channels < HALF_CHANNEL_ALIGN and max(s.weight_shape[2:]) <= SMALL_KERNEL:
        return 0
    return _transform_bytes(s)


def input_grad_workspace_bytes(s: ConvShape) -> int:
    """cuDNN's workspace for the input's gradient.

    NB: none for depthwise and pointwise convolutions (all 74, and 83 of 87 probed calls),
    otherwise the transform size: within 20% for 97% of the dense probed calls above 1 MiB
    (median error 0%). Unlike forward, a few-channel input does take one (35 of 56).
    """
    if s.depthwise or s.pointwise:
        return 0
    return _transform_bytes(s)


def weight_grad_workspace_bytes(s: ConvShape) -> int:
    """cuDNN's workspace for the weight's gradient.

    NB: dense convolutions: the transform size and the partial weight gradients of a split
    reduction, taken as `WEIGHT_GRAD_SPLIT` times the transform size (on the 333 dense probed
    calls above 1 MiB: median error 4%, within 5% for 61%, within 20% for 80%; the transform
    size alone: 54% and 78%, and 75% too small). Pointwise: one fp32 partial weight gradient
    per sample, or the transform size where that is smaller (median error 0%, within 20% for
    62% of the 45 probed calls above 1 MiB, never too large; the per-sample size alone fits 73%
    but is up to 8x too large where cuDNN takes the transform instead). Depthwise: none (70 of
    74 probed calls).
    """
    if s.depthwise:
        return 0
    if s.pointwise:
        per_sample = s.batch * math.prod(s.weight_shape) * POINTWISE_WEIGHT_GRAD_ACCUM
        if len(s.weight_shape) == 3:
            # NB: 1-D pointwise (Conv1d, kernel 1): the per-sample size alone fits better (11
            # of the 15 probed calls above 1 MiB within 5%, against 8 for the smaller of the two)
            return per_sample
        return min(per_sample, _transform_bytes(s))
    return int(_transform_bytes(s) * WEIGHT_GRAD_SPLIT)


def conv_shape(
    input: torch.Tensor,
    weight: torch.Tensor,
    output: torch.Tensor,
    stride: list[int],
    padding: list[int],
    transposed: bool,
    groups: int,
) -> ConvShape:
    """The shape of one `aten::convolution` call (unbatched inputs count as a batch of 1)."""
    batched = input.dim() == weight.dim()
    return ConvShape(
        batch=input.shape[0] if batched else 1,
        in_channels=input.shape[1] if batched else input.shape[0],
        input_numel=input.numel(),
        output_numel=output.numel(),
        weight_shape=tuple(weight.shape),
        stride=tuple(stride),
        padding=tuple(padding),
        groups=groups,
        transposed=transposed,
        element=input.element_size(),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Call:
    """One emulated `aten::convolution` call's arguments."""

    stride: list[int]
    padding: list[int]
    dilation: list[int]
    transposed: bool
    output_padding: list[int]
    groups: int
    emulator: CudnnConv


class _ConvFunction(torch.autograd.Function):
    """`aten::convolution` and its backward, with cuDNN's workspaces in between."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        call: _Call,
        input: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
    ) -> torch.Tensor:
        with torch._C._AutoDispatchBelowAutograd():
            out = aten.convolution.default(
                input, weight, bias, call.stride, call.padding, call.dilation,
                call.transposed, call.output_padding, call.groups,
            )  # fmt: skip
        shape = conv_shape(
            input, weight, out, call.stride, call.padding, call.transposed, call.groups
        )
        call.emulator.transient(forward_workspace_bytes(shape))
        ctx.call = call
        ctx.shape = shape
        ctx.bias_sizes = None if bias is None else list(bias.shape)
        ctx.save_for_backward(input, weight)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        call: _Call = ctx.call
        input, weight = ctx.saved_tensors
        wanted = ctx.needs_input_grad[1:4]
        args = (
            call.stride, call.padding, call.dilation, call.transposed, call.output_padding,
            call.groups,
        )  # fmt: skip
        grads: list[torch.Tensor | None] = [None, None, None]
        workspace = (input_grad_workspace_bytes, weight_grad_workspace_bytes, None)
        for i in range(3):
            if not wanted[i] or (i == 2 and ctx.bias_sizes is None):
                continue
            mask = [j == i for j in range(3)]
            with torch._C._AutoDispatchBelowAutograd():
                grads[i] = aten.convolution_backward.default(
                    grad, input, weight, ctx.bias_sizes, *args, mask
                )[i]
            size = workspace[i]
            if size is not None:
                call.emulator.transient(size(ctx.shape))
        return (None, *grads)


class CudnnConv:
    """Routes `aten::convolution` through `_ConvFunction` so cuDNN's workspaces are recorded.

    NB: the route is a Python kernel on the AutogradCPU key, registered for the duration of a
    trace; CUDA's autocast (AutocastCPU, a higher key) has cast the inputs by then, and it also
    applies inside checkpoint recomputation. Double backward through a convolution is not
    supported while it is installed.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.calls = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[CudnnConv]:
        """Register the routing kernel for the duration of the block."""
        with registered("AutogradCPU", {"convolution": self._convolution}):
            yield self

    def transient(self, nbytes: int) -> None:
        """Record a workspace of `nbytes` allocated and freed at once (none if 0)."""
        if nbytes <= 0:
            return
        recorder = self.recorder
        key = recorder.new_key()
        for size, op in ((nbytes, WORKSPACE_OP), (0, "free")):
            recorder.events.append(
                Event(
                    key=key,
                    nbytes=size,
                    alloc=size > 0,
                    phase=recorder.phase,
                    iteration=recorder.iteration,
                    op=op,
                )
            )

    def _convolution(
        self,
        input: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        stride: list[int],
        padding: list[int],
        dilation: list[int],
        transposed: bool,
        output_padding: list[int],
        groups: int,
    ) -> torch.Tensor:
        self.calls += 1
        call = _Call(
            stride=list(stride),
            padding=list(padding),
            dilation=list(dilation),
            transposed=transposed,
            output_padding=list(output_padding),
            groups=groups,
            emulator=self,
        )
        return _ConvFunction.apply(call, input, weight, bias)
