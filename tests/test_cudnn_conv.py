"""cuDNN convolution workspaces: the size rules at probed shapes, and where a trace puts them."""

from __future__ import annotations

import math

import pytest

from trainfit import TrainSpec
from trainfit.trace.kernels.cudnn_conv import (
    WORKSPACE_OP,
    ConvShape,
    forward_workspace_bytes,
    input_grad_workspace_bytes,
    weight_grad_workspace_bytes,
)
from trainfit.trace.step import Category, trace_step
from trainfit.trace.target import Target
from trainfit.training import Phase

CONVNET = dict(
    model="benchmarks.accuracy.user_steps:tiny_convnet",
    inputs=("x=B,3,32,32:float32",),
    batch=2,
    loss="benchmarks.accuracy.user_steps:mse_loss",
)


def _shape(
    x: list[int], w: list[int], out: list[int], stride: int, pad: list[int], el: int, **kw: object
) -> ConvShape:
    transposed = bool(kw.get("transposed", False))
    groups = int(kw.get("groups", 1))  # type: ignore[call-overload]
    out_ch = w[1] * groups if transposed else w[0]
    return ConvShape(
        batch=x[0], in_channels=x[1], input_numel=math.prod(x),
        output_numel=x[0] * out_ch * math.prod(out), weight_shape=tuple(w),
        stride=(stride,) * len(out), padding=tuple(pad), groups=groups, transposed=transposed,
        element=el,
    )  # fmt: skip


# Measured workspaces below are read off the H100 probe grid
# (benchmarks/accuracy/results/cudnn_probe_h100.json.gz).


def test_dense_forward_and_input_grad_are_the_transform_size() -> None:
    s = _shape([16, 192, 16, 16], [64, 192, 3, 3], [14, 16], 1, [0, 1], el=2)
    assert forward_workspace_bytes(s) == 2_252_816
    assert input_grad_workspace_bytes(s) == 2_252_816
    # measured 2,252,816 here; the rule adds the median split-reduction share (3.7%)
    assert weight_grad_workspace_bytes(s) == pytest.approx(2_252_816 * 1.037, abs=1)


def test_half_precision_pads_input_channels_to_eight() -> None:
    s = _shape([128, 12, 128, 128], [48, 12, 7, 7], [122, 128], 1, [0, 3], el=2)
    assert input_grad_workspace_bytes(s) == 259_073_552


def test_strided_1x1_takes_the_transform_without_the_weight() -> None:
    s = _shape([24, 384, 200], [16, 384, 1], [100], 2, [0], el=2)
    assert forward_workspace_bytes(s) == 3_763_216


def test_pointwise_takes_only_a_weight_grad_workspace() -> None:
    s = _shape([24, 128, 128, 128], [128, 384, 1, 1], [128, 128], 1, [0, 0], el=4, transposed=True)
    assert forward_workspace_bytes(s) == 0
    assert input_grad_workspace_bytes(s) == 0
    assert weight_grad_workspace_bytes(s) == pytest.approx(4_718_992, rel=1e-3)


def test_depthwise_and_small_image_stems_take_no_forward_workspace() -> None:
    dw = _shape([48, 512, 112, 112], [512, 1, 3, 3], [110, 112], 1, [0, 1], el=4, groups=512)
    assert (forward_workspace_bytes(dw), weight_grad_workspace_bytes(dw)) == (0, 0)
    stem = _shape([32, 3, 56, 56], [192, 3, 3, 3], [28, 28], 2, [1, 1], el=4)
    assert forward_workspace_bytes(stem) == 0
    assert input_grad_workspace_bytes(stem) > 0


def test_cuda_trace_has_conv_workspaces_after_outputs_and_gradients() -> None:
    trace = trace_step(TrainSpec(**CONVNET, precision="fp32"))
    first = [e for e in trace.events if e.iteration == 0]
    ops = [e.op for e in first]
    ws = [i for i, op in enumerate(ops) if op == WORKSPACE_OP]
    assert ws
    for i in ws:
        event = first[i]
        assert trace.category(event) is Category.WORKSPACES
        assert first[i + 1].key == event.key and not first[i + 1].alloc  # freed at once
        assert ops[i - 1] in ("convolution.default", "convolution_backward.default")
    forward = [i for i in ws if first[i].phase is Phase.FORWARD]
    backward = [i for i in ws if first[i].phase is Phase.BACKWARD]
    # 4 convolutions; the stem (3 channels, 3x3) takes none in forward and has no input grad
    assert len(forward) == 3
    assert len(backward) == 3 * 2 + 1


def test_cpu_trace_has_no_conv_workspaces() -> None:
    trace = trace_step(TrainSpec(**CONVNET, precision="fp32"), target=Target.cpu())
    assert not any(e.op == WORKSPACE_OP for e in trace.events)
