"""`trainfit.monitor.oom`: the out-of-memory report, its phase and module, and the next rung."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
from torch import nn

from tests.monitor.support import OOM_TEXT, GiB, Net, quiet, train
from trainfit.measure.backend import is_out_of_memory as is_oom
from trainfit.monitor import StepPhase
from trainfit.monitor.oom import Observed, RungChange, next_rung_observed
from trainfit.monitor.oom_words import move_text, oom_text, rung_text
from trainfit.plan.options import Change
from trainfit.spec import Precision, TrainSpec

SPEC = TrainSpec(model="gpt2", batch=8, seq_len=512)
"""fp32 GPT-2 on an H100: its next rung is bf16 mixed precision (two estimates, about 1 s)."""


@pytest.mark.slow
def test_oom_in_forward_with_spec(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = Net()
    monitor = quiet(model=model, spec=SPEC, console=True, tensorboard=str(tmp_path))
    with pytest.raises(torch.OutOfMemoryError) as caught, monitor as mon:
        train(model, mon, steps=2)
        model.boom.forward_oom = True
        train(model, mon, steps=1)
    assert str(caught.value) == OOM_TEXT  # NB: propagated unchanged
    report = mon.oom
    assert report is not None
    assert (report.step, report.phase, report.module) == (3, StepPhase.FORWARD, "boom")
    assert report.module_type == "Boom"
    assert report.requested_bytes == 2 * GiB
    assert report.allocated_bytes == GiB and report.total_bytes == 80 * GiB
    rung = report.next_rung
    assert rung.change == RungChange(change=Change.MIXED_PRECISION, precision=Precision.BF16)
    assert move_text(rung.change) == "bf16 mixed precision"
    assert rung.spec == dataclasses.replace(SPEC, precision="bf16")
    assert rung.saved_bytes is not None and rung.saved_bytes > 0
    assert rung.fits is True
    text = oom_text(report)
    assert text.startswith(
        "Out of memory at step 3, in the forward pass, in module boom (Boom): asking for "
        "2.00 GiB, 1.00 GiB allocated, 2.00 GiB reserved, peak 1.50 GiB this step of 80.00 GiB. "
        "Next rung of the low-memory ladder: bf16 mixed precision, predicted "
    )
    assert text.endswith("which fits the NVIDIA H100 80GB SXM (HBM3).")
    assert capsys.readouterr().err.splitlines()[-1] == "trainfit: " + text
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert "trainfit/out_of_memory/text_summary" in events.Tags()["tensors"]


@pytest.mark.slow
def test_rung_that_does_not_fit_names_the_rungs_until_a_fit() -> None:
    from trainfit.monitor.oom import next_rung_for_spec

    rung = next_rung_for_spec(TrainSpec(model="gpt2", batch=256, seq_len=1024))
    assert (move_text(rung.change), rung.fits) == ("bf16 mixed precision", False)
    assert rung.then == (
        RungChange(
            change=Change.QUARTER_MICRO_BATCH, micro_batch=64, grad_accum=4, effective_batch=256
        ),
        RungChange(change=Change.CHECKPOINTING),
    )
    assert rung.then_needed_bytes is not None and rung.then_needed_bytes < 80 * GiB
    assert rung_text(rung).endswith(
        "which does not fit the NVIDIA H100 80GB SXM (HBM3); with micro-batch 64 with 4 "
        "accumulation steps (effective batch 256) and gradient checkpointing as well: predicted "
        f"{rung.then_needed_bytes / GiB:.2f} GiB, which fits."
    )


def test_oom_names_the_innermost_module_in_forward() -> None:
    model = Net()
    with pytest.raises(torch.OutOfMemoryError), quiet(model=model) as mon:
        model.blocks[1].fc.register_forward_pre_hook(_raise_oom)  # NB: after the monitor's
        model(torch.randn(2, 8))
    assert mon.oom is not None
    assert (mon.oom.phase, mon.oom.module, mon.oom.module_type) == (
        StepPhase.FORWARD,
        "blocks.1.fc",
        "Linear",
    )


def _raise_oom(module: nn.Module, args: object) -> None:
    raise torch.OutOfMemoryError(OOM_TEXT)


def test_oom_in_backward_without_spec() -> None:
    model = Net()
    model.boom.backward_oom = True
    with pytest.raises(torch.OutOfMemoryError), quiet(model=model) as mon:
        train(model, mon, steps=1)
    report = mon.oom
    assert report is not None
    assert (report.step, report.phase, report.module) == (1, StepPhase.BACKWARD, "boom")
    assert report.next_rung.needed_bytes is None
    assert oom_text(report).startswith(
        "Out of memory at step 1, in the backward pass, at module boom"
    )
    assert oom_text(report).endswith(
        "Next rung of the low-memory ladder: mixed precision: run the forward and the loss under "
        "torch.autocast with bfloat16 (float16 with a GradScaler on GPUs older than Ampere) "
        "(pass spec= to the monitor for predicted figures)."
    )


def test_oom_in_the_optimizer_step() -> None:
    model = Net()

    class Failing(torch.optim.SGD):
        def step(self, closure=None):  # type: ignore[no-untyped-def]
            raise RuntimeError("CUDA error: out of memory")

    optimizer = Failing(model.parameters(), lr=0.1)
    monitor = quiet(model=model, optimizer=optimizer)
    with pytest.raises(RuntimeError, match="out of memory"), monitor as mon:
        model(torch.randn(2, 8)).sum().backward()
        optimizer.step()
    assert mon.oom is not None
    assert (mon.oom.phase, mon.oom.module) == (StepPhase.OPTIMIZER, None)


def test_other_errors_are_not_reported_and_propagate() -> None:
    with pytest.raises(ValueError, match="bad batch"), quiet(model=Net()) as mon:
        raise ValueError("bad batch")
    assert mon.oom is None
    assert not is_oom(ValueError("out of memory"))
    assert is_oom(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))


@pytest.mark.parametrize(
    ("seen", "change"),
    [
        (Observed(), "mixed precision: run the forward"),
        (Observed(autocast=True, micro_batch=8, accumulation=1), "micro-batch 2 with 4"),
        (Observed(autocast=True, micro_batch=2, accumulation=4), "gradient checkpointing"),
        (
            Observed(
                autocast=True, micro_batch=2, accumulation=4, checkpointing=True, optimizer="AdamW"
            ),
            "8-bit AdamW state (bitsandbytes.optim.AdamW8bit instead of AdamW)",
        ),
        (
            Observed(
                autocast=True, micro_batch=2, accumulation=4, checkpointing=True, optimizer="SGD"
            ),
            "micro-batch 1 with accumulation",
        ),
        (
            Observed(autocast=True, micro_batch=1, checkpointing=True, optimizer="SGD"),
            "every rung of the ladder is taken",
        ),
    ],
)
def test_rung_without_spec(seen: Observed, change: str) -> None:
    assert move_text(next_rung_observed(seen).change).startswith(change)


def test_ladder_order_matches_the_planner() -> None:
    from trainfit.hardware.catalog import get_device
    from trainfit.monitor import oom
    from trainfit.plan.ladder import LADDER, ladder_steps

    spec = TrainSpec(model="gpt2", batch=8, seq_len=128)
    steps = ladder_steps(spec, 8, get_device("h100"))
    changed = []
    for before, after in itertools.pairwise(steps):
        fields = [
            f.name
            for f in dataclasses.fields(TrainSpec)
            if getattr(before.spec, f.name) != getattr(after.spec, f.name)
        ]
        changed.append(fields or (["batch"] if after.micro_batch != before.micro_batch else []))
    assert changed == [["precision"], ["batch"], ["checkpointing"], ["optimizer"], ["batch"]]
    assert [s.change for s in steps[1:]] == list(LADDER)
    assert (
        oom.RUNG_NAMES
        == tuple(c.value for c in LADDER)
        == (
            "mixed precision",
            "quarter micro-batch",
            "gradient checkpointing",
            "8-bit AdamW",
            "micro-batch 1",
        )
    )
