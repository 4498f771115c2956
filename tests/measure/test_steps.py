"""`trainfit.measure.steps` on the CPU: real steps, out of memory and Ctrl-C, the step callback
and progress, a live module measured on a copy."""

from __future__ import annotations

import json

import pytest
import torch

from tests import measure_models
from tests.measure.fakes import BROKEN, FakeCuda, GiB
from tests.measure_models import CAPPED
from trainfit.errors import MeasureError
from trainfit.measure.backend import backend_for
from trainfit.measure.steps import measure
from trainfit.spec import TrainSpec


@pytest.mark.slow
def test_measure_runs_real_cpu_steps_and_counts_the_model_states():
    spec = TrainSpec(**CAPPED)
    m = measure(spec, steps=3, warmup=1, device="cpu")
    params = (16 * 32 + 32 + 32 * 4 + 4) * 4
    assert (m.kind, m.steps, m.warmup, m.interrupted) == ("cpu", 3, 1, False)
    assert m.parameter_bytes == params
    assert m.gradient_bytes == params
    assert m.optimizer_state_bytes >= 2 * params  # AdamW: exp_avg and exp_avg_sq (+ steps)
    assert m.peak_allocated_bytes is None and m.activation_bytes is None  # no CPU counters
    assert len(m.step_seconds) == 3 and all(s > 0 for s in m.step_seconds)
    assert m.samples_per_second == pytest.approx(4 / m.loop_step_seconds)
    assert m.device_needed_bytes == m.peak_used_bytes >= 0
    # every phase of every step (1 warm-up + 3 timed) was read
    assert [p.phase.value for p in m.phases[:3]] == ["forward", "backward", "optimizer"]
    assert len(m.phases) == 4 * 3
    assert json.loads(json.dumps(m.to_dict()))["steps"] == 3


@pytest.mark.slow
def test_measure_with_cuda_counters_gives_needed_as_reserved_plus_context():
    spec = TrainSpec(**CAPPED)
    fake = FakeCuda(context=600 << 20)
    m = measure(spec, steps=2, warmup=1, backend=fake, loop_steps=0)  # the phases hold the peaks
    assert m.peak_reserved_bytes == 2 * GiB
    # peak reserved + what the process holds outside the allocator (used - reserved at the end)
    assert m.device_needed_bytes == 2 * GiB + (600 << 20)
    assert m.peak_allocated_bytes == max(p.peak_allocated_bytes for p in m.phases)
    assert m.activation_bytes == 1 << 20  # one counter step between forward and backward
    assert m.free_at_start_bytes == 79 * GiB


def test_a_model_failing_its_own_forward_is_one_line_naming_the_module():
    with pytest.raises(MeasureError) as info:
        measure(TrainSpec(**BROKEN), steps=2, warmup=1, device="cpu")
    text = str(info.value)
    assert text.startswith("the model failed its own forward pass at step 1 (in module second)")
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x32 and 33x4)" in text
    assert "\n" not in text
    # raised outside the handler: no context keeps the failed step's frames alive
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_a_model_calling_sys_exit_is_one_line_not_an_exit():
    spec = TrainSpec(**{**BROKEN, "model": "tests.measure_models:exiting_mlp"})
    with pytest.raises(MeasureError, match=r"forward pass at step 1 .*: SystemExit: 5 \(at "):
        measure(spec, steps=2, warmup=1, device="cpu")


def test_out_of_memory_names_the_phase_the_batch_and_what_was_free():
    measure_models.LIMITS["train"] = 2
    with pytest.raises(
        MeasureError,
        match=r"^out of memory on Fake H100 in the forward pass of "
        r"step 1 \(in module <model>\) at micro-batch 4; 79.00 GiB was free of "
        r"80.00 GiB at the start; find what fits with `trainfit measure "
        r"--max-batch` or `trainfit plan`$",
    ):
        measure(TrainSpec(**CAPPED), steps=2, warmup=1, backend=FakeCuda())


@pytest.mark.slow
def test_ctrl_c_during_timed_steps_keeps_what_was_measured():
    # 1 warm-up + 2 timed steps complete, the 4th forward is interrupted
    measure_models.LIMITS["interrupt_after"] = 3
    m = measure(TrainSpec(**CAPPED), steps=10, warmup=1, device="cpu")
    assert m.interrupted and m.steps == 2 and len(m.step_seconds) == 2
    assert m.parameter_bytes > 0


@pytest.mark.slow
def test_ctrl_c_in_the_first_step_is_not_swallowed():
    measure_models.LIMITS["interrupt_after"] = 0
    with pytest.raises(KeyboardInterrupt):
        measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu")


def test_bad_counts_and_devices_are_one_line_errors():
    with pytest.raises(MeasureError, match=r"at least 1 timed step .* got steps=0, warmup=1"):
        measure(TrainSpec(**CAPPED), steps=0, warmup=1, device="cpu")
    with pytest.raises(MeasureError, match=r"phase times are read from CUDA events; .* has none"):
        measure(TrainSpec(**CAPPED), steps=1, warmup=0, device="cpu", phase_times=True)
    with pytest.raises(MeasureError, match=r"unknown local device 'tpu:0': use cuda, cuda:N"):
        backend_for("tpu:0")
    if not torch.cuda.is_available():
        with pytest.raises(MeasureError, match=r"^no CUDA GPU is visible here .* --on cpu$"):
            backend_for("cuda")


def test_on_step_reports_every_step_as_it_completes():
    seen = []
    m = measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu", on_step=seen.append)
    assert [(d.index, d.total, d.warmup) for d in seen] == [(0, 3, True), (1, 3, False),
                                                           (2, 3, False)]  # fmt: skip
    # the timed steps' times are the ones measured
    assert tuple(d.seconds for d in seen[1:]) == m.step_seconds


def test_an_error_in_the_callback_is_raised_as_itself_not_as_the_models():
    def broken(done):
        raise KeyError("the caller's bug")

    with pytest.raises(KeyError, match="the caller's bug"):
        measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu", on_step=broken)


def test_measure_tells_the_build_and_each_step_before_it_runs():
    from trainfit.progress import Activity, Part, reporting

    told = []
    with reporting(told.append):
        measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu")
    mine = [(e.name, e.index, e.total) for e in told if e.part is Part.MEASURE]
    assert mine == [(Activity.BUILD.value, None, None), (Activity.WARMUP.value, 1, 3),
                    (Activity.STEP.value, 2, 3), (Activity.STEP.value, 3, 3),
                    (Activity.LOOP.value, None, 2)]  # fmt: skip


def test_a_live_module_s_steps_are_measured_on_a_copy_with_its_weights() -> None:
    from torch import nn

    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    weight = net[0].weight.detach().clone()
    sample = (torch.randn(4, 8), torch.randint(0, 3, (4,)))
    done = measure(
        model=net, sample=sample, loss=nn.functional.cross_entropy, device="cpu", steps=2,
        warmup=0, loop_steps=0,
    )  # fmt: skip
    assert done.micro_batch == 4 and len(done.step_seconds) == 2
    assert done.parameter_bytes == sum(p.numel() * 4 for p in net.parameters())
    assert torch.equal(net[0].weight, weight) and net[0].weight.grad is None
