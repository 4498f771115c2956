"""`plan_stages()`: a staged schedule (seed 002's frozen backbone, then everything) planned
stage by stage."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit import TrainSpec
from trainfit.errors import SpecError
from trainfit.plan import plan
from trainfit.stages import plan_stages
from trainfit.timing.run import RunSpec

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


def test_each_stage_is_the_plan_of_its_own_spec(staged):
    frozen, full = staged.stages
    assert (frozen.epochs, full.epochs) == (5.0, 20.0)
    alone = plan(dataclasses.replace(MELODY, freeze=FROZEN), 256, ("h100", "rtx-4060"))
    assert frozen.plan.devices[0].setting == alone.devices[0].setting
    assert frozen.plan.trainable_parameters < full.plan.trainable_parameters
    # the frozen stage trains less: its step needs no more memory at the same setting
    f, a = frozen.plan.devices[1].setting, full.plan.devices[1].setting
    if (f.micro_batch, f.precision, f.checkpointing) == (
        a.micro_batch,
        a.precision,
        a.checkpointing,
    ):
        assert f.needed_bytes < a.needed_bytes
    assert not frozen.plan.ladder and full.plan.ladder  # the ladder of the last stage only


def test_the_schedule_sums_hours_and_costs_and_takes_the_largest_stage(staged):
    for i, schedule in enumerate(staged.devices):
        per_stage = [s.plan.devices[i] for s in staged.stages]
        assert schedule.fits
        assert schedule.peak_needed_bytes == max(d.setting.needed_bytes for d in per_stage)
        assert schedule.hours == pytest.approx(sum(d.run.hours for d in per_stage))
        for option, total in schedule.costs:
            lines = [next(c for c in d.costs if c.option == option) for d in per_stage]
            assert total == pytest.approx(sum(line.total for line in lines))
    assert staged.to_dict()["schedule"][0]["device"] == "h100"


def test_no_stage_is_an_error():
    with pytest.raises(SpecError, match="needs at least one stage"):
        plan_stages(MELODY, [], 256, ("h100",))


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
