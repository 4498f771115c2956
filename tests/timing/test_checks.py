"""The shipped step-time rules' blind check on the H100 (`timing/blind_check.json`): each H100
step time says it, made from the committed predictions and timed runs, for these very rules."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources

import pytest

from trainfit.hardware.catalog import get_device
from trainfit.plan.time_words import time_note_text
from trainfit.plan.times import over_gpus
from trainfit.spec import TrainSpec
from trainfit.timing import checks
from trainfit.timing.basis import BlindCheck, BlindChecked
from trainfit.timing.constants import blind_check, calibration
from trainfit.timing.step import scaled, step_time
from trainfit.trace.costs import OpCost, OpKind, StepCosts


def _step() -> StepCosts:
    table = (OpCost(OpKind.MEMORY, "fp32", 0, 1_000_000, 1, graph=True),)
    return StepCosts(table=table, forward=(0,), backward=(0,), optimizer=())


def _checks(**kwargs: object) -> list[BlindChecked]:
    device = kwargs.pop("device", "h100")
    step = step_time(_step(), TrainSpec(model="m"), get_device(str(device)), **kwargs)
    return [n for n in step.notes if isinstance(n, BlindChecked)]


def test_an_h100_step_time_says_how_the_rules_did_blind() -> None:
    check = blind_check()
    (note,) = _checks()
    assert (note.device, note.check) == ("NVIDIA H100 80GB SXM (HBM3)", check)
    assert time_note_text(note) == (
        f"NVIDIA H100 80GB SXM (HBM3) step times checked blind on {check.steps} single-GPU "
        f"training steps (models up to {check.largest_parameters / 1e9:.1f}B parameters, up to "
        f"{check.largest_trained / 1e6:.0f}M trained) timed after they were predicted "
        f"({len(check.sets)} sets, "
        f"{', '.join(check.measured)}): median error {check.median_error:.1%}, worst "
        f"{check.worst_error:+.1%}, {check.within_20_percent} of {check.steps} within 20%, "
        f"{check.under} predicted too fast; host-bound steps vary most between machines"
    )
    one = dataclasses.replace(
        note,
        check=dataclasses.replace(check, steps=1, sets=("x",), within_20_percent=1, under=0),
    )
    assert "on 1 single-GPU training step (models up to " in time_note_text(one)
    assert "timed after they were predicted (1 set, " in time_note_text(one)


def test_a_time_that_is_no_longer_the_rules_one_gpu_prediction_claims_no_check() -> None:
    step = step_time(_step(), TrainSpec(model="m"), get_device("h100"))
    assert any(isinstance(n, BlindChecked) for n in step.notes)
    for changed in (scaled(step, step, 0.5, "h100"), over_gpus(step, 8)):
        assert not any(isinstance(n, BlindChecked) for n in changed.notes)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"device": "a100-80gb"},  # another GPU: its family's public check instead
        {"device": "h100-pcie"},  # another H100: not the card the sets were timed on
        {"synced_loop": True},  # the sets timed loops that never synchronise
        {"cal": dataclasses.replace(calibration())},  # another calibration
        {"device_time_factor": 1.0},  # a factor given by the caller
        {"op_class_factors": {"memory": 1.0}},  # factors given by the caller
    ],
)
def test_no_blind_check_is_claimed_outside_what_was_checked(kwargs: dict[str, object]) -> None:
    assert _checks(**kwargs) == []


def test_a_forward_alone_claims_no_blind_check() -> None:
    forward = dataclasses.replace(_step(), backward=())
    step = step_time(forward, TrainSpec(model="m"), get_device("h100"), cal=calibration())
    assert not any(isinstance(n, BlindChecked) for n in step.notes)
    assert _checks(cal=calibration()) != []  # NB: the shipped calibration, given


def test_rules_not_yet_checked_claim_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.steptime import checked

    monkeypatch.setattr(checked, "SETS", ())
    record = checked.check_record()
    assert (record["steps"], record["median_error"], record["sets"]) == (0, None, [])
    assert (record["largest_parameters"], record["largest_trained"]) == (0, 0)
    record.pop("made_by")
    empty = BlindCheck(**{**record, "sets": (), "measured": ()})
    monkeypatch.setattr(checks, "blind_check", lambda: empty)
    assert _checks() == []


def test_the_file_is_the_committed_tables_pooled() -> None:
    from benchmarks.steptime.checked import check_record

    shipped = resources.files("trainfit.timing").joinpath("blind_check.json").read_text()
    assert json.loads(shipped) == check_record(), (
        "rerun PYTHONPATH=src:. python -m benchmarks.steptime.checked"
    )


@pytest.mark.slow
def test_the_rules_of_this_tree_made_the_checked_predictions() -> None:
    # NB: when the step-time rules change, the check is no longer theirs: `SETS` in
    # benchmarks/steptime/checked.py starts again with the first set they predict
    from benchmarks.steptime.checked import moved

    assert moved() == []
