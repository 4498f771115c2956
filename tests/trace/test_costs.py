"""Op costs: which ops record an autograd node, and which iteration's passes a step's costs are."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from trainfit.trace.costs import CostLog, OpCost, OpKind, graph_op
from trainfit.training import Phase


def test_an_op_records_an_autograd_node_only_in_grad_mode_with_an_input_requiring_grad() -> None:
    x = torch.randn(2, 4)
    w = torch.randn(4, 4, requires_grad=True)
    frozen = torch.randn(4, 4)
    assert graph_op((x, w), {})
    assert graph_op((x,), {"weight": [w]})
    assert not graph_op((x, frozen), {})
    with torch.no_grad():
        assert not graph_op((x, w), {})


def _op(n: int) -> OpCost:
    return OpCost(OpKind.MEMORY, "fp32", 0, n, 1)


def test_a_step_is_the_steady_iteration_when_it_was_traced_in_full() -> None:
    log = CostLog()
    # iteration 0: a one-off copy (two ops) before the forward's own op
    for n, phase in ((1, Phase.FORWARD), (2, Phase.FORWARD), (3, Phase.FORWARD)):
        log.add(_op(n), 0, phase)
    log.add(_op(4), 0, Phase.BACKWARD)
    log.add(_op(5), 0, Phase.OPTIMIZER)
    log.add(_op(3), 1, Phase.FORWARD)
    log.add(_op(4), 1, Phase.BACKWARD)
    log.add(_op(6), 1, Phase.OPTIMIZER)
    costs = log.step_costs()
    assert costs is not None
    assert [costs.table[i].bytes for i in costs.forward] == [3]
    assert [costs.table[i].bytes for i in costs.backward] == [4]
    assert [costs.table[i].bytes for i in costs.optimizer] == [6]


def test_a_replayed_iteration_takes_the_first_iterations_passes() -> None:
    log = CostLog()
    log.add(_op(1), 0, Phase.FORWARD)
    log.add(_op(2), 0, Phase.BACKWARD)
    log.add(_op(3), 0, Phase.OPTIMIZER)
    log.add(_op(7), 1, Phase.BACKWARD)  # the replay's own bookkeeping, no forward
    log.add(_op(4), 1, Phase.OPTIMIZER)
    costs = log.step_costs()
    assert costs is not None
    assert [costs.table[i].bytes for i in costs.forward] == [1]
    assert [costs.table[i].bytes for i in costs.backward] == [2]
    assert [costs.table[i].bytes for i in costs.optimizer] == [4]


def test_interpolated_costs_keep_a_recurrent_call_s_layers() -> None:
    """The costs at a batch between two traces keep each op's fields that do not scale with
    the batch: a cuDNN call's layers x directions, its detail, its autograd flag."""
    from trainfit.trace.costs import StepCosts, interpolate

    def costs(batch: int) -> StepCosts:
        rnn = OpCost(
            kind=OpKind.RNN,
            dtype="fp32",
            flops=1000 * batch,
            bytes=10 * batch,
            kernels=80,
            detail=3 * 128 * 128,
            graph=True,
            layers=4,
        )
        return StepCosts((rnn,), (0,), (0,), ())

    mid = interpolate(costs(2), 2, costs(6), 6, 4)
    (op,) = mid.table
    assert (op.flops, op.bytes, op.layers, op.detail, op.graph) == (
        4000,
        40,
        4,
        3 * 128 * 128,
        True,
    )


def _conv_call(
    weight: tuple[int, ...], groups: int = 1, transposed: bool = False
) -> tuple[tuple[Any, ...], torch.Tensor]:
    """A convolution's arguments (input of batch 2, 16 wide in every spatial dimension,
    stride 1, padding 1) and its output, on the meta device."""
    aten = torch.ops.aten
    spatial = len(weight) - 2
    channels = weight[0] if transposed else weight[1] * groups
    x = torch.empty(2, channels, *[16] * spatial, device="meta")
    w = torch.empty(weight, device="meta")
    ones, zeros = [1] * spatial, [0] * spatial
    args = (x, w, None, ones, ones, ones, transposed, zeros, groups)
    return args, aten.convolution.default(*args)


def _conv_cost(weight: tuple[int, ...], groups: int = 1, transposed: bool = False) -> OpCost:
    from trainfit.trace.costs import op_cost

    args, out = _conv_call(weight, groups, transposed)
    return op_cost(torch.ops.aten.convolution.default, args, {}, out)


def test_a_convolution_records_its_narrow_implicit_gemm_side() -> None:
    # the fewer of the output channels and the input channels times the kernel's size
    assert _conv_cost((32, 1, 4, 4)).detail == 16
    assert _conv_cost((1, 32, 3, 3)).detail == 1
    assert _conv_cost((64, 3, 7, 7)).detail == 64
    assert _conv_cost((64, 96, 4, 4), transposed=True).detail == 64
    # a 1-D and a 3-D convolution: the kernel's size is all its spatial extents
    assert _conv_cost((16, 4, 3)).detail == 12
    assert _conv_cost((64, 2, 3, 3, 3)).detail == 54
    # pointwise and grouped convolutions keep the conv fit alone
    assert _conv_cost((64, 256, 1, 1)).detail == 0
    assert _conv_cost((64, 1, 3, 3), groups=64).detail == 0


def test_a_convolutions_backward_is_a_gradient_kernel_of_its_forwards_side() -> None:
    # NB: convolution_backward takes the forward's weight, groups and transposed: the same side
    from trainfit.trace.costs import op_cost

    aten = torch.ops.aten
    for weight, groups, transposed in (
        ((32, 1, 4, 4), 1, False),
        ((64, 96, 4, 4), 1, True),
        ((16, 4, 3), 1, False),
        ((64, 2, 3, 3, 3), 1, False),
        ((64, 1, 3, 3), 64, False),
    ):
        args, out = _conv_call(weight, groups, transposed)
        forward = op_cost(aten.convolution.default, args, {}, out)
        back = (out, args[0], args[1], [0], *args[3:], [True, True, False])
        grads = aten.convolution_backward.default(*back)
        backward = op_cost(aten.convolution_backward.default, back, {}, grads)
        assert (forward.gradient, backward.gradient) == (False, True)
        assert backward.detail == forward.detail


def test_interpolated_costs_keep_a_gradient_kernel_marked() -> None:
    # NB: a plan's costs at a batch between two traces keep a convolution's backward a gradient
    from trainfit.trace.costs import StepCosts, interpolate

    def costs(batch: int) -> StepCosts:
        forward = OpCost(OpKind.CONV, "fp16", 1000 * batch, 10 * batch, 1, detail=16)
        backward = OpCost(OpKind.CONV, "fp16", 2000 * batch, 20 * batch, 1, 16, gradient=True)
        return StepCosts((forward, backward), (0,), (1,), ())

    mid = interpolate(costs(2), 2, costs(6), 6, 4)
    assert costs(2).aligned(costs(6))
    assert [(op.flops, op.detail, op.gradient) for op in mid.table] == [
        (4000, 16, False),
        (8000, 16, True),
    ]


def _sdpa_costs(batch: int, causal: bool, dropout: float) -> tuple[OpCost, OpCost]:
    """A fused SDPA call's forward and backward costs (batch x 12 heads, 256 tokens, head
    size 64), on the meta device."""
    from trainfit.trace.costs import op_cost

    aten = torch.ops.aten
    q, k, v = (torch.empty(batch, 12, 256, 64, device="meta") for _ in range(3))
    args = (q, k, v, None, True, dropout, causal)
    out = aten._scaled_dot_product_efficient_attention.default(*args)
    forward = op_cost(aten._scaled_dot_product_efficient_attention.default, args, {}, out)
    back = (out[0], q, k, v, None, out[0], out[1], out[2], out[3], dropout, [True] * 4, causal)
    grads = aten._scaled_dot_product_efficient_attention_backward.default(*back)
    backward = op_cost(
        aten._scaled_dot_product_efficient_attention_backward.default, back, {}, grads
    )
    return forward, backward


def test_a_fused_attention_call_records_its_shape() -> None:
    from trainfit.trace.costs import AttentionShape

    forward, backward = _sdpa_costs(2, causal=True, dropout=0.1)
    assert forward.attention == AttentionShape(24, 256, 64, True, True, False, keys=256)
    assert backward.attention == AttentionShape(24, 256, 64, True, True, True, keys=256)
    plain, _ = _sdpa_costs(2, causal=False, dropout=0.0)
    assert (plain.attention.causal, plain.attention.dropout) == (False, False)
    # every other op has none
    assert _conv_cost((32, 1, 4, 4)).attention is None


def test_interpolated_costs_put_an_attention_calls_problems_on_the_line() -> None:
    from trainfit.trace.costs import StepCosts, interpolate

    def costs(batch: int) -> StepCosts:
        return StepCosts(_sdpa_costs(batch, causal=True, dropout=0.0), (0,), (1,), ())

    assert costs(2).aligned(costs(6))
    mid = interpolate(costs(2), 2, costs(6), 6, 4)
    assert [op.attention.problems for op in mid.table] == [48, 48]
    assert [op.attention.backward for op in mid.table] == [False, True]
    # traces whose calls differ beyond the batch do not align
    other = StepCosts(_sdpa_costs(2, causal=False, dropout=0.0), (0,), (1,), ())
    assert not costs(2).aligned(other)


def test_flash_and_cudnn_calls_record_the_querys_heads_and_length() -> None:
    from trainfit.trace.costs import AttentionShape, op_cost

    aten = torch.ops.aten
    # grouped-query cross-attention: 12 query heads over 4 key heads, 512 keys for 256 queries
    q = torch.empty(2, 12, 256, 64, device="meta", dtype=torch.bfloat16)
    k = v = torch.empty(2, 4, 512, 64, device="meta", dtype=torch.bfloat16)
    flash = aten._scaled_dot_product_flash_attention.default
    out = flash(q, k, v, 0.1, True)
    shape = AttentionShape(24, 256, 64, causal=True, dropout=True, backward=False, keys=512)
    assert op_cost(flash, (q, k, v, 0.1, True), {}, out).attention == shape
    o, lse, cq, ck, mq, mk, seed, offset, _ = out
    back = (o, q, k, v, o, lse, cq, ck, mq, mk, 0.1, True, seed, offset)
    flash_back = aten._scaled_dot_product_flash_attention_backward.default
    grads = flash_back(*back)
    assert op_cost(flash_back, back, {}, grads).attention == dataclasses.replace(
        shape, backward=True
    )
    cudnn = aten._scaled_dot_product_cudnn_attention.default
    kwargs = {"dropout_p": 0.0, "is_causal": False}
    out = cudnn(q, k, v, None, True, **kwargs)
    recorded = op_cost(cudnn, (q, k, v, None, True), kwargs, out).attention
    assert recorded == dataclasses.replace(shape, causal=False, dropout=False)
