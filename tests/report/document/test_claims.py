"""`trainfit.report.document.claims`: a document's claims set against the plan's figures,
the training ones and the inference ones."""

from __future__ import annotations

import dataclasses

import pytest

from tests.report.document.wide import GIB, _device
from trainfit.errors import SpecError
from trainfit.plan.options import Plan
from trainfit.report.document import InferenceRow, Report, build_report, to_markdown
from trainfit.report.document.model import Missing, NoFigure
from trainfit.report.document.summary import verdict_text
from trainfit.timing.missing import NoRate, NoStepTime, NoTime, rate_lack_text


def test_claims_are_compared_and_disagreements_flagged(report, planned) -> None:
    memory, size = report.claims
    needed = _device(planned, "rtx-4060").setting.needed_bytes / GIB
    assert memory.trainfit == pytest.approx(needed) and memory.ratio == pytest.approx(needed / 99)
    assert memory.agrees is False
    assert size.trainfit == pytest.approx(planned.parameters / 1e6) and size.ratio == 1.0
    assert size.agrees is True
    md = to_markdown(report)
    assert (
        f"| peak memory on the RTX 4060 | wide | rtx-4060 | memory_gib | the plan's | 99 | "
        f"{needed:,.4g} | {needed / 99:.2f} | DISAGREES: the document counts the whole "
        "machine, trainfit the GPU | seed §RTX 4060 | the document counts the whole card |" in md
    )
    assert "| model size | wide | - | params_millions | the plan's | 30-40 |" in md


def test_a_claim_on_a_device_without_a_setting_has_no_trainfit_figure(planned) -> None:
    claim = {"what": "tiny", "device": "tiny-gpu", "quantity": "memory_gib", "value": 0.8}
    (check,) = build_report([planned], claims=[claim], names=["wide"]).claims
    assert (check.trainfit, check.ratio, check.agrees) == (None, None, None)
    assert check.missing is not None and check.missing.why is NoFigure.DOES_NOT_FIT
    assert check.missing.device == "tiny-gpu"
    assert verdict_text(check).startswith("not computed: does not fit one tiny-gpu")


def test_a_claim_that_cannot_be_found_is_an_error_naming_it(planned) -> None:
    bad = [
        {"what": "on a TPU", "device": "tpu-v5", "quantity": "hours", "value": 1},
        {"what": "speed", "device": "h100", "quantity": "furlongs", "value": 1},
        {"what": "other model", "model": "llama", "quantity": "params_millions", "value": 1},
        {"what": "which device", "quantity": "memory_gib", "value": 1},
    ]
    with pytest.raises(SpecError) as info:
        build_report([planned], claims=bad, names=["wide"])
    text = str(info.value)
    assert "claim 'on a TPU': device 'tpu-v5' is not in the plan of wide" in text
    assert (
        "claim 'speed': quantity 'furlongs' is not one of checkpointing_saves_percent, "
        "component_gib, cost_usd, decode_tokens_per_second, electricity_usd, fits, gpus" in text
    )
    assert "claim 'other model': model 'llama' is not in the plan: one of wide" in text
    assert "claim 'which device': name its device: one of h100, rtx-4060, tiny-gpu" in text


def test_a_claim_on_a_device_whose_time_is_not_modelled_says_so(planned) -> None:
    # a GPU with a setting but no step time (a catalog GPU with no compute rate for its
    # precision, e.g. the RTX 5060 Ti's bf16): not "no setting fits"
    lack = NoRate(device="Test GPU", precision="bf16")
    why = f"step time not modelled: {rate_lack_text(lack)}"
    gap = NoStepTime(why=NoTime.NOT_MODELLED, lack=lack)
    devices = tuple(
        dataclasses.replace(d, step_time=None, step_times=(), run=None, costs=(), no_time=gap)
        if d.device == "rtx-4060"
        else d
        for d in planned.devices
    )
    untimed = dataclasses.replace(planned, devices=devices)
    setting = _device(untimed, "rtx-4060").setting
    claims = [
        {"what": "step", "device": "rtx-4060", "quantity": "step_seconds", "value": 0.5},
        {"what": "hours", "device": "rtx-4060", "quantity": "hours", "value": 3},
        {"what": "memory", "device": "rtx-4060", "quantity": "memory_gib", "value": 1},
    ]
    report = build_report([untimed], claims=claims, names=["wide"])
    step, hours, memory = report.claims
    for check in (step, hours):
        assert check.trainfit is None
        assert check.missing == Missing(why=NoFigure.NO_STEP_TIME, device="rtx-4060", detail=why)
        assert verdict_text(check) == f"not computed: {why}"
    assert memory.trainfit == pytest.approx(setting.needed_bytes / GIB)
    md = to_markdown(report)
    assert "does not fit one rtx-4060" not in md and f"rtx-4060: {why}" in md
    assert f"{setting.micro_batch} x {setting.grad_accum}" in md


# --- inference rows and the inference claims ---


ROWS = (
    InferenceRow(device="rtx-4060", precision="bf16", batch=1, context=512, new_tokens=64,
                 memory_gib=2.0, fits=True, kind="generate", prefill_ms=10.0, per_token_ms=20.0,
                 decode_tokens_per_second=50.0, total_ms=1270.0, bound="bandwidth"),
    InferenceRow(device="rtx-4060", precision="bf16", batch=8, context=512, new_tokens=64,
                 memory_gib=3.0, fits=True, kind="generate", prefill_ms=40.0, per_token_ms=25.0,
                 decode_tokens_per_second=320.0, total_ms=1615.0, bound="bandwidth"),
    InferenceRow(device="m4-pro-16gb", precision="bf16", batch=1, context=0, memory_gib=None,
                 fits=None, kind="refused", note="inference is estimated for CUDA GPUs"),
)  # fmt: skip


def _with_rows(planned: Plan, claims: list[dict[str, object]]) -> Report:
    return build_report([planned], names=["wide"], inference=[ROWS], claims=claims)


def test_inference_claims_match_model_device_precision_and_batch(planned) -> None:
    claims = [
        {"what": "speed", "device": "rtx-4060", "quantity": "decode_tokens_per_second",
         "value": [40, 60], "batch": 1},
        {"what": "latency b8", "device": "rtx-4060", "quantity": "latency_ms", "value": 1000,
         "batch": 8, "precision": "bf16"},
        {"what": "memory", "device": "rtx-4060", "quantity": "inference_memory_gib",
         "value": 3.0, "batch": 8},
        {"what": "mac", "device": "m4-pro-16gb", "quantity": "latency_ms", "value": 100},
    ]  # fmt: skip
    speed, latency, memory, mac = _with_rows(planned, claims).claims
    assert (speed.trainfit, speed.ratio, speed.agrees) == (50.0, 1.0, True)
    assert speed.note == "generate, bf16, batch 1"
    assert latency.trainfit == 1615.0 and latency.ratio == pytest.approx(1.615)
    assert latency.agrees is False
    assert memory.trainfit == 3.0 and memory.agrees is True
    assert (mac.trainfit, mac.agrees) == (None, None)
    assert mac.missing == Missing(
        why=NoFigure.NO_INFERENCE,
        device="m4-pro-16gb",
        detail="inference is estimated for CUDA GPUs",
    )


def test_inference_claims_that_cannot_be_matched_name_the_choices(planned) -> None:
    bad = [
        {"what": "which", "device": "rtx-4060", "quantity": "latency_ms", "value": 1},
        {"what": "int4", "device": "rtx-4060", "quantity": "latency_ms", "value": 1,
         "precision": "int4"},
        {"what": "tpu", "device": "h100", "quantity": "latency_ms", "value": 1},
    ]  # fmt: skip
    with pytest.raises(SpecError) as info:
        _with_rows(planned, bad)
    text = str(info.value)
    assert "claim 'which': name its precision and batch: bf16 batch 1, bf16 batch 8" in text
    assert (
        "claim 'int4': no inference row of wide on rtx-4060 at the claim's precision/batch: "
        "one of bf16 batch 1, bf16 batch 8" in text
    )
    assert "claim 'tpu': device 'h100' is not in the inference table of wide" in text
    with pytest.raises(SpecError, match="the plan of wide has no inference table"):
        build_report(
            [planned], names=["wide"], claims=[{"what": "x", "device": "h100",
                                                "quantity": "latency_ms", "value": 1}]
        )  # fmt: skip
