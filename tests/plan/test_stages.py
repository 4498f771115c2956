"""`plan_stages()`: a staged schedule (seed 002's frozen backbone, then everything) planned
stage by stage."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit import TrainSpec, estimate
from trainfit.errors import SpecError
from trainfit.plan.search import plan
from trainfit.plan.stages import plan_stages
from trainfit.plan.time_words import basis_text
from trainfit.plan.words import failing_text, note_text
from trainfit.timing.run import RunSpec
from trainfit.timing.step import TimeLabel

MELODY = TrainSpec(model="trainfit.models.zoo:melody_transformer", seq_len=256)
FROZEN = ("tok.*", "pos.*", "blocks.0.*", "blocks.1.*")


@pytest.fixture(scope="module")
def staged():
    stages = [
        ("stage 1 (frozen)", 5.0, dataclasses.replace(MELODY, freeze=FROZEN)),
        ("stage 2", 20.0, MELODY),
    ]
    run = RunSpec(samples=100_000)
    return plan_stages(MELODY, stages, 256, ("h100", "rtx-4060"), run=run)


@pytest.mark.slow
def test_each_stage_is_the_plan_of_its_own_spec(staged):
    frozen, full = staged.stages
    assert (frozen.epochs, full.epochs) == (5.0, 20.0)
    alone = plan(dataclasses.replace(MELODY, freeze=FROZEN), 256, ("h100", "rtx-4060"))
    assert frozen.plan.devices[0].setting == alone.devices[0].setting
    assert frozen.plan.trainable_parameters < full.plan.trainable_parameters
    # the frozen stage trains less: at the full stage's setting its step needs less memory
    f, a = frozen.plan.devices[1].setting, full.plan.devices[1].setting
    frozen_spec = dataclasses.replace(MELODY, freeze=FROZEN, device="rtx-4060")

    def needed(s):
        at = dataclasses.replace(
            frozen_spec,
            batch=s.micro_batch,
            precision=s.precision,
            checkpointing=s.checkpointing,
            optimizer=s.optimizer,
        )
        return estimate(at).device_memory_needed_bytes

    assert needed(f) == f.needed_bytes
    assert needed(a) < a.needed_bytes
    assert not frozen.plan.ladder and full.plan.ladder  # the ladder of the last stage only


@pytest.mark.slow
def test_the_schedule_sums_hours_and_costs_and_takes_the_largest_stage(staged):
    for i, schedule in enumerate(staged.devices):
        per_stage = [s.plan.devices[i] for s in staged.stages]
        assert schedule.fits and schedule.failing_stages == ()
        assert schedule.costs  # priced in every stage (one's own device at least)
        assert schedule.peak_needed_bytes == max(d.setting.needed_bytes for d in per_stage)
        assert schedule.hours == pytest.approx(sum(d.run.hours for d in per_stage))
        for option, total in schedule.costs:
            lines = [next(c for c in d.costs if c.option == option) for d in per_stage]
            assert total == pytest.approx(sum(line.total for line in lines))
    assert staged.to_dict()["schedule"][0]["device"] == "h100"


def test_no_stage_is_an_error():
    with pytest.raises(SpecError, match="needs at least one stage"):
        plan_stages(MELODY, [], 256, ("h100",))


@pytest.mark.slow
def test_the_schedule_is_rendered_after_each_stage(staged):
    from rich.console import Console

    from trainfit.report.stages import staged_renderable

    console = Console(width=140, record=True)
    console.print(staged_renderable(staged))
    text = console.export_text()
    assert "stage 1 (frozen): 5 epochs, frozen: tok.*, pos.*, blocks.0.*, blocks.1.*" in text
    assert (
        text.index("stage 1 (frozen)")
        < text.index("stage 2: 20 epochs")
        < text.index("the whole schedule")
    )
    h100 = staged.devices[0]
    cheapest = min(h100.costs, key=lambda c: c[1])
    assert f"{cheapest[1]:.2f} USD ({cheapest[0]})" in text
    assert f"{h100.peak_needed_bytes / 2**30:.2f} GiB" in text


@pytest.mark.slow
def test_plan_command_with_stages_writes_each_stages_exports(tmp_path, capsys):
    import json

    from trainfit.cli.main import main

    args = [
        "plan",
        MELODY.model,
        "--seq",
        "256",
        "--effective-batch",
        "256",
        "--device",
        "h100",
        "--stage",
        "5:tok.*,blocks.0.*",
        "--stage",
        "20",
        "--samples",
        "100000",
        "--json",
        "--export",
        "hf",
        "--export-dir",
        str(tmp_path),
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["epochs"] for s in out["stages"]] == [5.0, 20.0]
    assert out["stages"][0]["freeze"] == ["tok.*", "blocks.0.*"]
    assert out["schedule"][0]["device"] == "h100" and out["schedule"][0]["fits"]
    for number in (1, 2):
        exported = json.loads((tmp_path / f"stage{number}" / "hf_h100.json").read_text())
        assert exported["per_device_train_batch_size"] >= 1


def test_plan_command_refuses_epochs_with_stages(capsys):
    from trainfit.cli.main import main

    args = [
        "plan",
        MELODY.model,
        "--seq",
        "256",
        "--effective-batch",
        "256",
        "--device",
        "h100",
        "--stage",
        "5",
        "--samples",
        "1000",
        "--epochs",
        "3",
    ]
    assert main(args) == 1
    assert "give --epochs or --stage, not both" in capsys.readouterr().err


@pytest.mark.slow
def test_a_measured_step_is_the_last_stages_and_scales_every_stage(staged):
    stages = [
        ("stage 1 (frozen)", 5.0, dataclasses.replace(MELODY, freeze=FROZEN)),
        ("stage 2", 20.0, MELODY),
    ]
    run = RunSpec(samples=100_000)
    measured = plan_stages(
        MELODY, stages, 256, ("h100", "rtx-4060"), run=run, measured_step=(0.5, "h100")
    )
    (frozen, full), (was_frozen, was_full) = measured.stages, staged.stages
    assert full.plan.devices[0].step_time.seconds == pytest.approx(0.5)
    assert full.plan.devices[0].step_time.label is TimeLabel.MEASURED
    # the frozen stage keeps its modelled ratio to the full one: not the measured seconds
    ratio = (
        was_frozen.plan.devices[0].step_time.seconds / was_full.plan.devices[0].step_time.seconds
    )
    assert ratio < 1
    assert frozen.plan.devices[0].step_time.seconds == pytest.approx(0.5 * ratio)
    assert frozen.plan.devices[0].step_time.label is TimeLabel.CALIBRATED
    assert "for the last stage (stage 2)" in basis_text(frozen.plan.devices[0].step_time.basis)
    # the other device: the same factor, and the hours worked out again with it
    factor = 0.5 / was_full.plan.devices[0].step_time.seconds
    for now, before in ((frozen, was_frozen), (full, was_full)):
        rtx, rtx_before = now.plan.devices[1], before.plan.devices[1]
        assert rtx.step_time.seconds == pytest.approx(rtx_before.step_time.seconds * factor)
        assert rtx.run.hours != pytest.approx(rtx_before.run.hours)
    assert measured.devices[1].hours == pytest.approx(
        sum(s.plan.devices[1].run.hours for s in measured.stages)
    )


def _tiny_catalog(tmp_path) -> str:
    """A 2.2 GB card (and an 8-card machine of it): gpt2 at seq 128 fits it with the blocks
    frozen, not with everything trainable."""
    import json

    card = {
        "display": "Tiny card",
        "kind": "cuda",
        "architecture": "hopper",
        "runtime_profile": "modelled-from-hopper",
        "memory_gb": 2.2,
        "compute_capability": [9, 0],
    }
    box = {"provider": "aws", "gpu": "tiny-card", "region": "x"}
    data = {
        "devices": {"tiny-card": card},
        "instances": {"eight-tiny": {**box, "gpu_count": 8, "on_demand_usd_per_hour": 10.0}},
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.slow
def test_a_device_that_fits_one_stage_names_the_stage_that_does_not(tmp_path):
    from rich.console import Console

    from trainfit.hardware.catalog import using_catalogs
    from trainfit.report.stages import staged_renderable

    spec = TrainSpec(model="gpt2", seq_len=128)
    stages = [
        ("stage 1 (frozen)", 1.0, dataclasses.replace(spec, freeze=("transformer.h.*",))),
        ("stage 2", 2.0, spec),
    ]
    with using_catalogs([_tiny_catalog(tmp_path)]):
        staged = plan_stages(spec, stages, 8, ("tiny-card",))
    frozen, full = (s.plan.devices[0] for s in staged.stages)
    assert frozen.setting is not None and full.setting is None
    (schedule,) = staged.devices
    assert not schedule.fits and schedule.peak_needed_bytes is None
    ((name, failing),) = schedule.failing_stages
    assert failing == full
    why = failing_text(failing)
    assert name == "stage 2" and why.startswith("does not fit")
    # one sample is too many for this card even sharded: the stage's note says so
    assert full.sharded is None and why == f"does not fit: {note_text(full)}"
    assert staged.to_dict()["schedule"][0]["failing_stages"] == [{"stage": name, "why": why}]
    console = Console(width=200, record=True)
    console.print(staged_renderable(staged))
    text = console.export_text()
    table = text[text.index("the whole schedule") :]
    assert "tiny-card" in table and "stage 2" in table
    assert f"tiny-card, stage 2: {why[:60]}" in " ".join(table.split())


def test_a_wrong_spec_or_stage_is_one_line() -> None:
    with pytest.raises(
        SpecError,
        match=r"^plan_stages: spec must be a TrainSpec, got str: give one, or its fields as "
        r"keyword arguments: plan_stages\(model=module, sample=batch\)$",
    ):
        plan_stages("gpt2", [], 8, "h100")  # type: ignore[arg-type]
    with pytest.raises(
        SpecError,
        match=r"^plan_stages: each stage must be \(name, epochs, its TrainSpec or the globs it "
        r"freezes\), got a tuple of \(str, str, TrainSpec\)$",
    ):
        plan_stages(MELODY, [("one", "1", MELODY)], 8, "h100")  # type: ignore[list-item]
    with pytest.raises(SpecError, match=r"^plan_stages: effective_batch must be an int, got str"):
        plan_stages(MELODY, [("one", 1, MELODY)], "8", "h100")  # type: ignore[arg-type]
    for wrong, message in (
        ({"margin": "0.1"}, r"^plan_stages: margin must be an int or float, got str"),
        ({"jobs": "2"}, r"^plan_stages: jobs must be an int, got str"),
        ({"run": "x"}, r"^plan_stages: run must be a RunSpec, got str"),
        ({"measured_step": 3}, r"^plan_stages: measured_step must be \(seconds, device name\)"),
    ):
        with pytest.raises(SpecError, match=message):
            plan_stages(MELODY, [("one", 1, MELODY)], 8, "h100", **wrong)  # type: ignore[arg-type]


def test_a_live_module_s_stages_freeze_its_globs() -> None:
    import torch
    from torch import nn

    net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    staged = plan_stages(
        net, sample=torch.randn(4, 16), stages=[("head", 2, "0.*"), ("all", 3, [])],  # type: ignore[arg-type]
        effective_batch=32, devices="rtx-4060",
    )  # fmt: skip
    head, whole = staged.stages
    assert (head.freeze, whole.freeze) == (("0.*",), ())
    assert head.plan.trainable_parameters == 64 * 4 + 4
    assert whole.plan.trainable_parameters == 16 * 64 + 64 + 64 * 4 + 4
    assert head.plan.spec.model == whole.plan.spec.model  # NB: one registration for both
