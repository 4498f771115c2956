"""Claims computed at the document's own setting, on a GPU count, summed over models, and the
device-level figures (power, electricity, price, ownership); typed reasons and missing figures."""

from __future__ import annotations

import pytest

from trainfit.errors import SpecError
from trainfit.hardware.catalog import get_device
from trainfit.plan.options import Plan
from trainfit.plan.search import plan
from trainfit.report.document import build_report
from trainfit.report.document.model import NoFigure
from trainfit.spec import TrainSpec
from trainfit.timing.run import RunSpec

MLP = "trainfit.models.zoo:emotion_mlp"
GIB = 2**30
RUN = RunSpec(samples=64_000, epochs=2, years=3, hours_per_year=100)


@pytest.fixture(scope="module")
def plans() -> tuple[Plan, Plan]:
    spec = TrainSpec(model=MLP, device="rtx-4060")
    one = plan(spec, 64, ("rtx-4060", "m4-pro-16gb"), ladder=False, run=RUN)
    two = plan(spec, 32, ("rtx-4060", "m4-pro-16gb"), ladder=False, run=RUN)
    return one, two


def _check(plans: tuple[Plan, Plan], **claim: object):
    base = {"what": "x", "model": "a", "value": 1.0}
    (check,) = build_report(list(plans), names=["a", "b"], claims=[{**base, **claim}]).claims
    return check


def test_memory_at_the_documents_setting_is_the_plans_scaling_there(plans) -> None:
    one = plans[0]
    chosen = next(d for d in one.devices if d.device == "rtx-4060").setting
    check = _check(plans, device="rtx-4060", quantity="memory_gib",
                   setting={"micro_batch": 4, "precision": chosen.precision.value})  # fmt: skip
    assert check.trainfit == pytest.approx(one.scalings["rtx-4060"].needed_bytes(4) / GIB)
    assert check.setting is not None and check.setting.micro_batch == 4


def test_hours_at_a_setting_and_over_two_gpus(plans) -> None:
    at = {"micro_batch": 32, "precision": "fp16"}
    one = _check(plans, device="rtx-4060", quantity="hours", setting=at)
    two = _check(plans, device="rtx-4060", quantity="hours", setting=at, gpus=2)
    assert one.trainfit is not None and two.trainfit is not None
    assert two.trainfit < one.trainfit  # NB: twice the samples a step, plus the all-reduce
    plain = _check(plans, device="rtx-4060", quantity="hours")
    assert plain.trainfit == pytest.approx(plans[0].devices[0].run.hours)


def test_hours_summed_over_models(plans) -> None:
    hours = [p.devices[0].run.hours for p in plans]
    check = _check(plans, device="rtx-4060", quantity="hours", models=["a", "b"], model=None)
    assert check.trainfit == pytest.approx(sum(hours)) and check.model == "a + b"


def test_local_and_cloud_costs(plans) -> None:
    d = plans[0].devices[0]
    local = next(c for c in d.costs if c.kind == "local")
    check = _check(plans, device="rtx-4060", quantity="cost_usd")
    assert check.trainfit == pytest.approx(round(local.total, 2))
    mac = _check(plans, device="m4-pro-16gb", quantity="cost_usd", gpus=1)
    assert mac.trainfit is not None


def test_largest_micro_batch_fits_and_trainable_share(plans) -> None:
    d = plans[0].devices[0]
    largest = _check(plans, device="rtx-4060", quantity="max_micro_batch")
    assert largest.trainfit == d.max_micro_batch
    assert _check(plans, device="rtx-4060", quantity="fits").trainfit == 1.0
    assert _check(plans, quantity="trainable_percent").trainfit == pytest.approx(100.0)


def test_power_electricity_price_and_ownership_of_a_device(plans) -> None:
    card = get_device("rtx-4060")
    watts = float(card.tdp_watts.value)
    price = float(card.price.amount.value)
    power = _check(plans, device="rtx-4060", quantity="power_watts")
    energy = _check(plans, device="rtx-4060", quantity="electricity_usd")
    owned = _check(plans, device="rtx-4060", quantity="ownership_usd")
    assert power.trainfit == watts
    assert energy.trainfit == pytest.approx(watts * 300 / 1000 * RUN.kwh_price)
    assert owned.trainfit == pytest.approx(price + energy.trainfit)
    mac = _check(plans, device="m4-pro-16gb", quantity="ownership_usd")
    assert mac.trainfit is None and mac.missing.why is NoFigure.NO_PRICE


def test_the_cpu_is_not_planned_and_says_why(plans) -> None:
    check = _check(plans, device="cpu", quantity="fits")
    assert check.trainfit is None and check.missing.why is NoFigure.HOST_DEPENDENT


def test_an_unknown_reason_is_refused_with_the_choices(plans) -> None:
    with pytest.raises(SpecError, match=r"reason 'vibes' is not one of data_loading, "):
        _check(plans, quantity="params_millions", reason="vibes")


def test_a_comparison_is_the_two_figures_own_over_the_other(plans) -> None:
    mac = _check(plans, device="m4-pro-16gb", quantity="hours", gpus=1)
    card = _check(plans, device="rtx-4060", quantity="hours", gpus=1)
    check = _check(plans, device="m4-pro-16gb", quantity="hours", gpus=1,
                   versus={"device": "rtx-4060", "compare": "times"})  # fmt: skip
    assert check.figures == (mac.trainfit, card.trainfit)
    assert check.trainfit == pytest.approx(mac.trainfit / card.trainfit)
    assert check.versus_device == "rtx-4060" and check.versus.compare == "times"


def test_a_percentage_less_or_more_at_two_settings(plans) -> None:
    low = {"micro_batch": 4096, "precision": "fp16"}
    high = {"micro_batch": 4096, "precision": "fp32"}
    mac = "m4-pro-16gb"
    half = _check(plans, device=mac, quantity="memory_gib", setting=low).trainfit
    full = _check(plans, device=mac, quantity="memory_gib", setting=high).trainfit
    less = _check(plans, device=mac, quantity="memory_gib", setting=low,
                  versus={"setting": high, "compare": "percent_less"})  # fmt: skip
    more = _check(plans, device=mac, quantity="memory_gib", setting=high,
                  versus={"setting": low, "compare": "percent_more"})  # fmt: skip
    assert half != full and less.figures == (half, full) and more.figures == (full, half)
    assert less.trainfit == pytest.approx(100 * (1 - half / full))
    assert more.trainfit == pytest.approx(100 * (full / half - 1))


def test_a_comparison_with_another_model(plans) -> None:
    a = _check(plans, device="rtx-4060", quantity="micro_batch").trainfit
    b = _check(plans, device="rtx-4060", quantity="micro_batch", model="b").trainfit
    check = _check(plans, device="rtx-4060", quantity="micro_batch",
                   versus={"model": "b", "compare": "times"})  # fmt: skip
    assert (a, b) == (64, 32) and check.trainfit == pytest.approx(2.0)


def test_a_compiled_setting_is_not_computed_and_says_why(plans) -> None:
    at = {"micro_batch": 32, "precision": "fp32", "compile": True}
    eager = {"setting": {**at, "compile": False}, "compare": "percent_less"}
    check = _check(plans, device="rtx-4060", quantity="step_seconds", setting=at, versus=eager)
    assert check.trainfit is None and check.missing.why is NoFigure.COMPILED
    assert check.figures is None and check.setting.compile


def test_an_unknown_comparison_is_refused_with_the_choices(plans) -> None:
    with pytest.raises(SpecError, match=r"versus.compare 'ratio' is not one of times, "):
        _check(plans, device="rtx-4060", quantity="hours", versus={"compare": "ratio"})


def test_components_at_a_setting_sum_to_its_memory(plans) -> None:
    at = {"micro_batch": 8, "precision": "fp32"}
    parts = ["parameters", "gradients", "optimizer state", "activations", "temporaries",
             "workspaces", "allocator overhead", "runtime context"]  # fmt: skip
    whole = _check(plans, device="rtx-4060", quantity="memory_gib", setting=at).trainfit
    summed = _check(plans, device="rtx-4060", quantity="component_gib", component=parts,
                    setting=at).trainfit  # fmt: skip
    acts = _check(plans, device="rtx-4060", quantity="component_gib", component="activations",
                  setting={**at, "micro_batch": 4096}).trainfit  # fmt: skip
    small = _check(plans, device="rtx-4060", quantity="component_gib", component="activations",
                   setting=at).trainfit  # fmt: skip
    assert summed == pytest.approx(whole) and acts > small >= 0


def test_spot_savings_from_the_catalogs_instances_or_why_not(plans, monkeypatch) -> None:
    from types import SimpleNamespace

    from trainfit.report.document import figures

    none = _check(plans, device="a100-40gb", quantity="spot_saves_percent")
    assert none.trainfit is None and none.missing.why is NoFigure.NO_PRICE

    def rate(value: float | None) -> SimpleNamespace:
        return SimpleNamespace(value=value)

    fake = {
        "one": SimpleNamespace(gpu="a100-40gb", on_demand_usd_per_hour=rate(4.0),
                               spot_usd_per_hour=rate(1.0)),
        "two": SimpleNamespace(gpu="A100 40GB", on_demand_usd_per_hour=rate(4.0),
                               spot_usd_per_hour=rate(2.0)),
        "other": SimpleNamespace(gpu="h100", on_demand_usd_per_hour=rate(4.0),
                                 spot_usd_per_hour=rate(0.4)),
    }  # fmt: skip
    monkeypatch.setattr(figures, "instances", lambda: fake)
    check = _check(plans, device="a100-40gb", quantity="spot_saves_percent")
    assert check.trainfit == pytest.approx(75.0)
