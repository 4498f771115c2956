"""The CPU as a target: the trace runs as stock CPU PyTorch, the result is an RSS increase."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from trainfit import SpecError, TrainSpec, estimate
from trainfit.cli.main import main
from trainfit.hardware.catalog import get_device
from trainfit.hardware.host import total_ram_bytes
from trainfit.memory.host import CPU_HEAP_SLACK, CPU_RUNTIME_BYTES
from trainfit.plan.time_words import basis_text, no_time_text, time_note_text
from trainfit.timing.missing import NoTime
from trainfit.trace.target import Target

MLP = "trainfit.models.zoo:emotion_mlp"


@pytest.fixture(scope="module")
def mlp_cpu():
    return estimate(TrainSpec(model=MLP, batch=64, precision="fp32", device="cpu"))


def test_breakdown_sums_to_memory_needed(mlp_cpu) -> None:
    result = mlp_cpu
    assert result.breakdown.total() == result.device_memory_needed_bytes
    slack = int(result.peak_reserved_bytes * CPU_HEAP_SLACK)
    assert result.device_memory_needed_bytes == (
        result.peak_reserved_bytes + slack + CPU_RUNTIME_BYTES
    )
    assert result.breakdown.workspaces == 0  # no cuBLAS on the CPU
    assert result.breakdown.runtime_context == CPU_RUNTIME_BYTES
    assert result.breakdown.allocator_overhead >= 0
    assert result.attention_kernels == {}


def test_parameters_and_state_are_unrounded_bytes(mlp_cpu) -> None:
    # no 512-byte blocks on the CPU: the breakdown counts requested bytes (and BatchNorm's
    # running statistics, which are buffers)
    params = mlp_cpu.parameter_count
    assert 4 * params < mlp_cpu.breakdown.parameters < 4 * params * 1.01
    assert mlp_cpu.breakdown.gradients == 4 * params
    assert mlp_cpu.peak_allocated_bytes >= 4 * params * 4  # params, grads, two moments


def test_fits_against_detected_ram(mlp_cpu) -> None:
    ram = total_ram_bytes()
    assert ram is not None and ram > 1 << 30  # Linux and macOS report it
    assert mlp_cpu.device.memory_bytes == ram
    assert mlp_cpu.fits is True


def test_cpu_rules_take_the_cpu_defaults() -> None:
    import torch

    rules = Target.cpu().rules(torch.bfloat16)
    assert rules.foreach is False
    with rules.autocast():
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert Target.cuda().rules(None).foreach is True


def test_cli_estimates_gpt2_on_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "gpt2", "--batch", "1", "--seq", "32", "--device", "cpu", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "cpu"
    assert data["breakdown"]["workspaces"] == 0
    # 124M fp32 parameters, gradients and two AdamW moments at least
    assert data["device_memory_needed_bytes"] > 16 * 124_000_000
    assert data["labels"]["device_memory_needed_bytes"].startswith("peak RSS increase")


def test_other_device_kinds_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    odd = dataclasses.replace(get_device("cpu"), name="npu", kind="npu")
    monkeypatch.setattr(sys.modules["trainfit.estimator.step"], "get_device", lambda name: odd)
    with pytest.raises(
        SpecError, match="device 'npu' is of kind 'npu': only CUDA GPUs, Apple GPUs and the CPU"
    ):
        estimate(TrainSpec(model=MLP, batch=2))


def test_onednn_lstm_workspace_matches_the_real_op() -> None:
    import torch

    from trainfit.trace.kernels.onednn import _probe, workspace_bytes

    real = _probe(64, 5, 48, 40, torch.float32, True, False)  # batch 5 is not a probe batch
    assert abs(workspace_bytes(64, 5, 48, 40, torch.float32, True, False) - real) <= 2 * 4096


def test_cpu_lstm_trace_keeps_the_workspace() -> None:
    import torch

    from trainfit.models.zoo import melody_lstm
    from trainfit.trace.kernels.onednn import workspace_bytes
    from trainfit.trace.step import trace_step

    lstm = melody_lstm().lstm
    spec = TrainSpec(model="trainfit.models.zoo:melody_lstm", batch=2, seq_len=32, device="cpu")
    trace = trace_step(spec, target=Target.cpu(), iterations=1)
    sizes = {e.nbytes for e in trace.events if e.alloc and e.op.startswith("mkldnn_rnn_layer")}
    first = workspace_bytes(32, 2, lstm.input_size, lstm.hidden_size, torch.float32, True, False)
    assert first in sizes


def test_terminal_names_the_cpu_quantities(mlp_cpu) -> None:
    from trainfit.report.terminal import render_text

    text = render_text(mlp_cpu)
    assert "memory needed (peak RSS increase):" in text
    assert "peak resident (malloc replay)" in text
    assert "device memory needed" not in text


def test_a_cpu_estimate_has_a_modelled_step_time(mlp_cpu) -> None:
    step = mlp_cpu.step_time
    assert step is not None and mlp_cpu.step_time_missing is None
    assert step.seconds == pytest.approx(
        step.forward_seconds + step.backward_seconds + step.optimizer_seconds
    )
    assert "microbenchmarks" in basis_text(step.basis)
    from rich.console import Console

    from trainfit.report.terminal import time_renderable

    console = Console(width=200, record=True)
    console.print(time_renderable(mlp_cpu))
    text = console.export_text()
    assert f"step time: {step.seconds * 1000:,.1f} ms per optimizer step (modelled)" in text
    assert "in matrix multiplies and convolutions" in text and "waiting for the host" not in text


def test_bf16_on_a_cpu_without_native_bf16_is_slower_and_says_why() -> None:
    from trainfit.estimator.cpu import estimate_cpu
    from trainfit.hardware.cpu_features import CpuFeatures

    laptop = CpuFeatures(
        model="Intel(R) Core(TM) i7-8550U", cores=4, threads=4, clock_mhz=1800.0,
        flags=frozenset({"avx", "avx2", "fma"}), source="/proc/cpuinfo",
    )  # fmt: skip
    at = {p: TrainSpec(model=MLP, batch=64, precision=p, device="cpu") for p in ("fp32", "bf16")}
    fp32, bf16 = (estimate_cpu(s, get_device("cpu"), 0.0, laptop) for s in at.values())
    assert bf16.step_time.seconds > 3 * fp32.step_time.seconds
    notes = [time_note_text(n) for n in bf16.step_time.notes]
    assert any("bf16 on Intel(R) Core(TM) i7-8550U is emulated" in n for n in notes)
    assert not fp32.step_time.notes
    no_clock = dataclasses.replace(laptop, clock_mhz=None)
    missing = estimate_cpu(at["fp32"], get_device("cpu"), 0.0, no_clock)
    assert missing.step_time is None
    assert missing.step_time_missing is not None
    assert missing.step_time_missing.why is NoTime.NOT_MODELLED
    assert "clock could not be read" in no_time_text(missing.step_time_missing)
