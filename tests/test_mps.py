"""Apple GPUs (MPS), modelled: the heap allocator replay, the MPS trace rules, estimate and plan.

No Mac was available: these tests pin the rules taken from PyTorch's MPS sources (allocator
sizes, autocast lists, attention path, optimizer path), not measured figures.
"""

from __future__ import annotations

import dataclasses

import pytest

from trainfit import TrainSpec, estimate
from trainfit.errors import SpecError
from trainfit.estimator.result import AppleMemory
from trainfit.memory.allocator import OutOfMemory
from trainfit.memory.mps_allocator import MiB, MpsAllocator, heap_size
from trainfit.memory.runtime import METAL_OTHER_FLOOR_BYTES
from trainfit.plan.options import Verdict
from trainfit.plan.search import plan
from trainfit.plan.words import change_text, note_text
from trainfit.report.estimate import estimate_dict
from trainfit.spec import OptimizerKind, Precision
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target

GPT_SMALL = TrainSpec(model="trainfit.models.zoo:melody_transformer", seq_len=256, batch=4)
MAC = "m1-pro-16gb"


def test_heap_sizes_follow_mps_allocator() -> None:
    assert heap_size(100) == (8 * MiB, True)
    assert heap_size(5 * MiB) == (32 * MiB, True)
    assert heap_size(100 * MiB) == (1024 * MiB, True)
    assert heap_size(600 * MiB + 1) == (602 * MiB, False)


def test_buffers_are_page_aligned_and_cut_from_shared_heaps() -> None:
    a = MpsAllocator()
    assert a.malloc(1, 100) == 16 << 10
    assert a.malloc(2, 5 * MiB) == 5 * MiB
    assert a.malloc(3, 100 * MiB) == 100 * MiB
    assert a.reserved == (8 + 32 + 1024) * MiB
    assert a.malloc(4, 600 * MiB) == 600 * MiB  # the 1 GiB heap still has room for it
    assert a.reserved == (8 + 32 + 1024) * MiB and a.segments == 3


def test_cached_buffer_reused_whole_within_32_mib() -> None:
    a = MpsAllocator()
    a.malloc(1, 100 * MiB)
    a.free(1)
    assert a.malloc(2, 90 * MiB) == 100 * MiB  # at most 32 MiB larger: used whole
    assert a.allocated == 100 * MiB


def test_oversized_cached_buffer_stays_cached_while_a_heap_has_room() -> None:
    """`get_free_buffer`: a heap with room serves the request; the oversized buffer stays."""
    a = MpsAllocator()
    a.malloc(1, 100 * MiB)
    a.free(1)
    assert a.malloc(2, 10 * MiB) == 10 * MiB  # cut from the 1 GiB heap's free room
    assert a.malloc(3, 95 * MiB) == 100 * MiB  # the 100 MiB buffer was still cached
    assert a.reserved == 1024 * MiB and a.segments == 1


def test_oversized_cached_buffer_makes_room_when_no_heap_has_any() -> None:
    """No heap with room: the oversized buffer goes back into its heap, which serves the
    request; no new heap is made."""
    a = MpsAllocator()
    a.malloc(1, 600 * MiB)  # a heap of its own (over 512 MiB)
    a.free(1)
    assert a.malloc(2, 20 * MiB) == 20 * MiB
    assert a.reserved == 600 * MiB and a.segments == 1


def test_capacity_releases_cached_buffers_then_raises() -> None:
    a = MpsAllocator(capacity=1100 * MiB)
    a.malloc(1, 500 * MiB)
    a.free(1)
    assert a.malloc(2, 600 * MiB) == 600 * MiB  # the cached heap is dropped to make room
    assert a.reserved == 600 * MiB and a.retries == 1
    with pytest.raises(OutOfMemory):
        a.malloc(3, 600 * MiB)


def _ops(trace) -> set[str]:
    return {event.op for event in trace.events}


def test_mps_trace_takes_the_math_attention_and_the_for_loop_optimizer() -> None:
    mps = trace_step(GPT_SMALL, target=Target.mps())
    cuda = trace_step(GPT_SMALL, target=Target.cuda((9, 0)))
    assert {k.value for k in mps.attention} == {"math"}
    assert not any(op.startswith("_foreach") for op in _ops(mps))
    assert any(op.startswith("_foreach") for op in _ops(cuda))
    # the math path keeps the attention scores: more activation memory than CUDA's kernels
    assert max_allocated(mps) > max_allocated(cuda)


def max_allocated(trace) -> int:
    live = peak = 0
    sizes: dict[int, int] = {}
    names = trace.category_names()
    for index, event in enumerate(trace.events):
        if event.alloc and names[index] is not None:
            sizes[event.key] = event.nbytes
            live += event.nbytes
            peak = max(peak, live)
        elif not event.alloc and event.key in sizes:
            live -= sizes.pop(event.key)
    return peak


def test_mps_autocast_runs_batch_norm_in_fp32_unlike_cuda() -> None:
    """MPS autocast lists batch_norm under fp32; CUDA autocast leaves it to its input."""
    import torch
    from torch import nn

    from trainfit.trace.autocast import CUDA_POLICY, MPS_POLICY, TargetAutocast

    linear, norm = nn.Linear(3, 3), nn.BatchNorm1d(3)
    x = torch.randn(4, 3)
    dtypes = {}
    for name, policy in (("mps", MPS_POLICY), ("cuda", CUDA_POLICY)):
        emulated = TargetAutocast(torch.bfloat16, policy)
        with emulated.installed(), emulated.region():
            h = linear(x)
            dtypes[name] = (h.dtype, norm(h).dtype)
    assert dtypes == {
        "mps": (torch.bfloat16, torch.float32),
        "cuda": (torch.bfloat16, torch.bfloat16),
    }


def test_estimate_on_a_mac_is_labelled_modelled() -> None:
    result = estimate(dataclasses.replace(GPT_SMALL, device=MAC))
    data = estimate_dict(result)
    assert data["device_memory_bytes"] == 16 * 2**30 * 2 // 3
    # never below Metal's floor from the public out-of-memory messages (never zero)
    assert data["breakdown"]["runtime_context"] == METAL_OTHER_FLOOR_BYTES > 0
    assert data["device_memory_needed_bytes"] == (
        result.peak_reserved_bytes + METAL_OTHER_FLOOR_BYTES
    )
    assert data["labels"]["peak_reserved_bytes"].startswith("modelled (MPS heap allocator")
    assert set(data["attention_kernels"]) == {"math"}
    assert result.peak_reserved_bytes >= result.peak_allocated_bytes > 0
    assert result.fits is True
    assert AppleMemory(working_set_bytes=16 * 2**30 * 2 // 3) in result.notes
    assert any(note.startswith("Apple GPU: modelled") for note in data["notes"])


def test_tf32_on_a_mac_is_a_one_line_error() -> None:
    with pytest.raises(SpecError, match="precision 'tf32' is a CUDA setting") as info:
        estimate(model="trainfit.models.zoo:emotion_mlp", batch=2, device=MAC, precision="tf32")
    assert "\n" not in str(info.value)
    with pytest.raises(SpecError, match="tf32 is a CUDA setting, not available on m1-pro-16gb"):
        plan(GPT_SMALL, effective_batch=8, devices=(MAC,), precision=Precision.TF32)


@pytest.fixture(scope="module")
def mac_plan():
    return plan(GPT_SMALL, effective_batch=64, devices=(MAC, "m4-pro-24gb"), ladder=False)


@pytest.mark.slow
def test_a_mac_gets_a_plan_in_fp32_first(mac_plan) -> None:
    for device in mac_plan.devices:
        assert device.verdict in (Verdict.COMFORTABLE, Verdict.WITH_CHANGES), device
        assert device.setting is not None and device.setting.precision is Precision.FP32
        assert device.setting.needed_bytes <= 0.9 * device_memory(device.device)
        assert device.max_micro_batch >= device.setting.micro_batch


def device_memory(name: str) -> int:
    from trainfit.hardware.catalog import get_device

    return get_device(name).memory_bytes


def test_mac_rungs_fp32_then_fp16_autocast_then_checkpointing_never_8_bit() -> None:
    from trainfit.hardware.catalog import get_device
    from trainfit.plan.ladder import setting_rungs

    rungs = setting_rungs(GPT_SMALL, get_device(MAC), auto_precision=True)
    assert [(r.precision, r.checkpointing, r.optimizer) for r, _ in rungs] == [
        (Precision.FP32, False, OptimizerKind.ADAMW),
        (Precision.FP16, False, OptimizerKind.ADAMW),
        (Precision.FP16, True, OptimizerKind.ADAMW),
    ]
    assert change_text(rungs[1][1][0]).startswith("fp16 autocast (torch 2.5 or later")
    cuda = setting_rungs(GPT_SMALL, get_device("rtx-4060"), auto_precision=True)
    assert cuda[-1][0].optimizer is OptimizerKind.ADAMW_8BIT


@pytest.mark.slow
def test_fp16_autocast_on_a_mac_keeps_attention_in_fp32() -> None:
    """Training attention on MPS is PyTorch's math path, which upcasts fp16 inputs to fp32
    (`allow_fp16_bf16_reduction_math_sdp` off by default): fp16 autocast then saves nothing
    here and costs more than fp32, as the plan's rungs find."""
    spec = dataclasses.replace(GPT_SMALL, device=MAC, seq_len=1024, batch=2)
    fp32 = estimate(spec)
    fp16 = estimate(dataclasses.replace(spec, precision="fp16"))
    assert fp16.peak_allocated_bytes > fp32.peak_allocated_bytes
    # autocast did run: the fp16 step holds fp16 copies of the weights
    casts = [
        e
        for e in trace_step(dataclasses.replace(spec, precision="fp16"), target=Target.mps()).events
        if e.op == "autocast:weight-cast"
    ]
    assert casts


def test_a_model_too_big_for_a_mac_does_not_fit() -> None:
    """A 1.2B model's fp32 AdamW states (19.8 GB) exceed a 16 GB Mac's 10.7 GiB working set at
    every rung the Mac has."""
    spec = TrainSpec(model="llama-3.2-1b", seq_len=512)
    big = plan(spec, effective_batch=8, devices=(MAC,), ladder=False).devices[0]
    assert big.verdict is Verdict.NO and big.setting is None
    assert "over the 9.60 GiB usable" in note_text(big)  # 90% of 2/3 of 16 GiB


@pytest.mark.slow
def test_a_macs_config_file_runs_on_mps_without_pinned_memory(mac_plan) -> None:
    from trainfit.export.configs import config_text, device_config

    mac = mac_plan.devices[0]
    data = device_config(mac_plan, mac)
    assert data["device"] == {"type": "mps", "name": MAC, "fallback": "cpu"}
    assert data["data"]["pin_memory"] is False
    assert data["training"]["mixed_precision"] is False
    assert "modelled for an Apple GPU, not measured" in config_text(mac_plan, mac)
