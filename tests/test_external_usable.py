"""The GeForce visible-memory and CUDA-context rules, fitted on public out-of-memory messages
(benchmarks/external/usable.py), held to their held-out accuracy and to the catalog's copy."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from benchmarks.external.load import load_corpus
from benchmarks.external.mps_limits import LEFT_OUT as MPS_LEFT_OUT
from benchmarks.external.mps_limits import fit as mps_fit
from benchmarks.external.mps_limits import mps_rows, share
from benchmarks.external.usable import WDDM, fit, oom_rows, visible_gib

from trainfit.errors import TrainfitError, UnknownNameError
from trainfit.hardware.catalog import catalog
from trainfit.hardware.figures import UNKNOWN
from trainfit.memory import runtime

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = json.loads(
    (ROOT / "benchmarks/external/results/usable_memory.json").read_text(encoding="utf-8")
)
ROWS = oom_rows(load_corpus())
GiB = 1 << 30


def test_the_committed_fit_is_the_fit_of_the_calibration_rows() -> None:
    assert fit(ROWS) == COMMITTED
    fitted = set(COMMITTED["visible_rows"]) | set(COMMITTED["context_rows"])
    split = {r.id: r.split for r in ROWS}
    assert fitted and all(split[row] == "calibration" for row in fitted)


def test_the_runtime_profile_carries_the_fit() -> None:
    assert COMMITTED["context_fixed_gib"] == runtime.GEFORCE_CONTEXT_FIXED_GIB
    assert COMMITTED["context_per_sm_gib"] == runtime.GEFORCE_CONTEXT_PER_SM_GIB


def test_heldout_visible_memory_within_015_gib() -> None:
    held = [r for r in ROWS if r.split == "heldout" and r.id not in WDDM]
    assert len(held) >= 8
    misses = [visible_gib(r.box_gb, COMMITTED) - r.total_gib for r in held]
    assert max(abs(m) for m in misses) <= 0.15, misses  # worst today: +0.13 (RTX 5090)


def test_heldout_context_within_005_gib() -> None:
    held = [r for r in ROWS if r.split == "heldout" and r.context_gib is not None and r.sms]
    assert len(held) >= 3
    for r in held:
        predicted = COMMITTED["context_fixed_gib"] + COMMITTED["context_per_sm_gib"] * r.sms
        assert abs(predicted - r.context_gib) <= 0.05, r.id  # worst today: +0.034


@pytest.mark.parametrize(
    "name", [n for n, d in catalog().devices.items() if d.runtime_profile == "geforce-oom-fit"]
)
def test_geforce_rows_use_the_evidence_or_the_rule(name: str) -> None:
    device = catalog().devices[name]
    figure = device.memory_visible_bytes
    assert device.memory_bytes == figure.value
    if figure.source.key == "usable-fit":
        assert figure.value == round(visible_gib(device.memory_gb.value, COMMITTED) * GiB)
    else:  # the lowest total capacity of the card's calibration messages, else of its own
        own = [r for r in ROWS if r.device_key == name]
        calibration = [r.total_gib for r in own if r.split == "calibration"]
        totals = calibration or [r.total_gib for r in own]
        assert totals and figure.value == round(min(totals) * GiB)
    context = runtime.profile_of(device).base_context_bytes
    sms = device.sm_count.value
    expected = COMMITTED["context_fixed_gib"] + COMMITTED["context_per_sm_gib"] * sms
    assert abs(context - expected * GiB) < 2 * sms + 2  # rounding of the two byte constants


def test_a_profile_per_sm_without_the_sm_count_is_an_error() -> None:
    device = catalog().devices["rtx-4060"]
    bare = dataclasses.replace(device, sm_count=UNKNOWN)
    with pytest.raises(TrainfitError, match="sm_count"):
        runtime.profile_of(bare)


def test_an_unknown_runtime_profile_is_an_error_naming_the_profiles() -> None:
    device = dataclasses.replace(catalog().devices["rtx-4060"], runtime_profile="geforce-fit")
    with pytest.raises(UnknownNameError) as raised:
        runtime.profile_of(device)
    assert str(raised.value) == (
        "unknown runtime profile 'geforce-fit'; did you mean 'geforce-oom-fit'? (device 'rtx-4060')"
    )


MPS = mps_rows(load_corpus())
MPS_COMMITTED = json.loads(
    (ROOT / "benchmarks/external/results/mps_limits.json").read_text(encoding="utf-8")
)


def test_the_committed_mps_fit_is_the_fit_of_the_calibration_rows() -> None:
    assert mps_fit(MPS) == MPS_COMMITTED
    split = {r.id: r.split for r in MPS}
    assert all(split[row] == "calibration" for row in MPS_COMMITTED["share_rows"])


def test_the_metal_floor_is_the_committed_one() -> None:
    assert round(MPS_COMMITTED["metal_other_floor_gib"] * GiB) == runtime.METAL_OTHER_FLOOR_BYTES


def test_heldout_mac_limits_are_never_over_the_real_one() -> None:
    held = [r for r in MPS if r.split == "heldout" and r.ram_gb and r.id not in MPS_LEFT_OUT]
    assert len(held) >= 3
    for r in held:
        assert share(r.ram_gb, MPS_COMMITTED) * r.ram_gb <= r.limit_gib + 0.01, r.id


@pytest.mark.parametrize("name", [n for n, d in catalog().devices.items() if d.kind == "mps"])
def test_mac_rows_follow_the_evidence(name: str) -> None:
    device = catalog().devices[name]
    if not device.memory_visible_bytes.known:
        return
    ram = device.memory_gb.value
    expected = 2 / 3 if ram <= 32 else MPS_COMMITTED["large_share"]
    # within 1 MiB: the 16 GB rows carry the logged 10922.67 MiB
    assert abs(device.memory_bytes - expected * ram * GiB) <= 1 << 20


def test_a_verdict_on_the_8_gb_laptop_card_uses_what_pytorch_sees(capsys) -> None:
    from trainfit.cli.main import main

    device = catalog().devices["rtx-4060-laptop"]
    assert device.memory_bytes == round(7.75 * GiB) < 8 * GiB
    argv = ["estimate", "trainfit.models.zoo:emotion_mlp", "--batch", "32", "--device"]
    assert main([*argv, "rtx 4060 laptop"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "of 7.75 GiB" in out
    assert "usable: 7.75 GiB of the 8 GB (what PyTorch sees: the 'total capacity' of public" in out
    assert "a display on the card" not in out  # a laptop's display is on the integrated GPU
