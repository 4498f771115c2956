"""How FSDP2 really runs the step (found on 2 x H100, benchmarks/sharded/results/multigpu_h100.md):
in bf16 without autocast, and with its sharded gradients in the reduce-scatter stream's pool."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit.distributed import Layout, Offload, Strategy, rank_memory, units
from trainfit.distributed.memory import engine_bytes, traced_precision
from trainfit.hardware.catalog import get_device
from trainfit.spec import Precision, TrainSpec
from trainfit.trace.step import StepTrace, trace_step
from trainfit.trace.target import Target

H100 = get_device("h100")


@pytest.fixture(scope="module")
def gpt2() -> tuple:
    spec = TrainSpec(model="gpt2", seq_len=128, batch=2, precision="bf16", device="h100")
    target = Target.of(H100)
    autocast = trace_step(spec, target=target)
    pure = trace_step(dataclasses.replace(spec, precision=Precision.PURE_BF16), target=target)
    return spec, autocast, pure, units(spec)


def test_fsdp2_with_bf16_is_traced_in_pure_bf16_and_other_engines_as_asked() -> None:
    assert traced_precision(Strategy.FSDP2, Precision.BF16) is Precision.PURE_BF16
    assert traced_precision(Strategy.FSDP2_HYBRID, Precision.BF16) is Precision.PURE_BF16
    assert traced_precision(Strategy.DDP, Precision.BF16) is Precision.BF16
    assert traced_precision(Strategy.ZERO3, Precision.BF16) is Precision.BF16
    assert traced_precision(Strategy.FSDP2, Precision.FP32) is Precision.FP32
    assert traced_precision(Strategy.FSDP2, Precision.FP16) is Precision.FP16


def test_gpt2s_activations_are_smaller_without_autocast(gpt2: tuple) -> None:
    # GPT-2's tanh GELU goes through pow, which autocast runs in fp32 (and layer_norm): the
    # activations FSDP2 (bf16 parameters, no autocast) saves are bf16
    _, autocast, pure, _ = gpt2

    def saved(trace: StepTrace) -> int:
        names = trace.category_names()
        return sum(e.nbytes for n, e in zip(names, trace.events, strict=True) if n == "activations")

    assert saved(pure) < 0.8 * saved(autocast)


def test_the_pure_bf16_trace_keeps_fp32_states_per_rank(gpt2: tuple) -> None:
    spec, autocast, pure, sizes = gpt2
    layout = Layout(gpus=2)
    revised = rank_memory(
        pure, spec, H100, Strategy.FSDP2, Offload.NONE, layout, sizes, Precision.PURE_BF16
    )
    # the same fp32 master parameters and AdamW state per rank as the autocast trace's
    old = rank_memory(autocast, spec, H100, Strategy.FSDP2, Offload.NONE, layout, sizes)
    assert revised.parameters_bytes == old.parameters_bytes
    # NB: within 0.5%: AdamW's scalar step tensors are fp32 in both traces, doubled here
    assert revised.optimizer_state_bytes == pytest.approx(old.optimizer_state_bytes, rel=0.005)
    assert abs(revised.parameters_bytes - sizes.total * 4 // 2) < 0.03 * sizes.total * 2
    assert revised.activations_bytes < old.activations_bytes
    assert revised.total_bytes < old.total_bytes


def test_fsdp2s_sharded_gradients_sit_beside_the_replay(gpt2: tuple) -> None:
    spec, _, pure, sizes = gpt2
    for gpus in (1, 2, 4):
        layout = Layout(gpus=gpus)
        got = rank_memory(
            pure, spec, H100, Strategy.FSDP2, Offload.NONE, layout, sizes, Precision.PURE_BF16
        )
        assert got.gradients_bytes == 0  # not in the default stream's pool
        shard = -(-sizes.trainable * 4 // gpus)  # fp32, a full share, all the time
        base = engine_bytes(Strategy.FSDP2, spec.precision, sizes, layout, Offload.NONE)
        assert got.engine_bytes == base + shard
    # offloaded gradients are on the host: nothing beside the replay
    off = rank_memory(
        pure,
        spec,
        H100,
        Strategy.FSDP2,
        Offload.PARAMS,
        Layout(gpus=2),
        sizes,
        Precision.PURE_BF16,
    )
    base = engine_bytes(Strategy.FSDP2, spec.precision, sizes, Layout(gpus=2), Offload.PARAMS)
    assert off.engine_bytes == base


def test_ddp_is_not_changed(gpt2: tuple) -> None:
    spec, autocast, _, sizes = gpt2
    ddp = rank_memory(autocast, spec, H100, Strategy.DDP, Offload.NONE, Layout(gpus=2), sizes)
    assert ddp.engine_bytes == sizes.trainable * 4  # the buckets only
    assert traced_precision(Strategy.DDP, spec.precision) is spec.precision
