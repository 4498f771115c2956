"""Every device a seed spec file names has the rates its step time needs, from the catalog.

The step-time model needs the memory bandwidth and a peak rate for each precision the device
runs (its `precisions` figure; fp8 is not a training precision the model times). A missing
rate raises RateMissing, never a guessed default. The gaps that no page read so far closes are
listed in KNOWN_GAPS with the reason; closing one must remove it from the list.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from trainfit.hardware.catalog import catalog, devices, get_device
from trainfit.timing.constants import family_fits
from trainfit.timing.missing import RateMissing
from trainfit.timing.step import _rate

ROOT = Path(__file__).resolve().parents[1]
SEEDS = sorted((ROOT / "examples" / "seeds").glob("*/spec.yaml"))
TIMED = ("fp32", "tf32", "fp16", "bf16")
KNOWN_GAPS: dict[str, set[str]] = {}
"""Seed devices' rates no page read so far gives (none since the RTX 5060 Ti's and the RTX
3060's tensor rates were derived; see DERIVED)."""
DERIVED = {
    "rtx-5060-ti": {"tf32", "fp16", "bf16"},  # scaled from the RTX 5090's tensor/vector ratio
    "rtx-3060": {"tf32", "bf16"},  # GeForce Ampere's tensor/vector ratios (GA102 whitepaper)
    "rtx-3070": {"tf32", "fp16", "bf16"},  # the same GeForce Ampere ratios
    "rtx-3080": {"tf32", "fp16", "bf16"},
    "rtx-4070-ti-super": {"tf32", "fp16", "bf16"},  # GeForce Ada's (the RTX 4090's row)
    "rtx-6000-ada": {"tf32", "fp16", "bf16"},  # the L40S row's (professional AD102)
    "a10": {"bf16"},  # = fp16 on data-centre Ampere
}
"""Rates derived from published figures of the same architecture, not published for the card:
their notes must say so."""
TENSOR_OVER_VECTOR = {"rtx-6000-ada": 4.01, "a10": 4.01}
"""Largest derived tensor / vector FP32 ratio where it is not GeForce's 2 (professional and
data-centre cards accumulate FP32 at full rate: 2x for TF32, 4x for FP16/BF16)."""


def _device_names(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "devices" and isinstance(value, list):
                yield from (str(v) for v in value)
            elif key == "device" and isinstance(value, str):
                yield value
            else:
                yield from _device_names(value)
    elif isinstance(node, list):
        for item in node:
            yield from _device_names(item)


def _seed_devices() -> list[str]:
    """GPU rows the seed spec files name (a cloud instance counts as its GPU; the host CPU is
    timed from this machine's own rates, `trainfit.timing.cpu`, not from catalog figures)."""
    names: set[str] = set()
    instances = catalog().instances
    for path in SEEDS:
        for name in _device_names(yaml.safe_load(path.read_text(encoding="utf-8"))):
            names.add(catalog().instance(name).gpu if name in instances else name)
    return sorted(n for n in names if get_device(n).kind != "cpu")


def _gaps(name: str) -> set[str]:
    device = get_device(name)
    wanted = [p for p in (device.precisions.value or ()) if p in TIMED]
    return {p for p in wanted if not (device.tflops.get(p) and device.tflops[p].value)}


def test_seed_files_name_devices() -> None:
    assert SEEDS and len(_seed_devices()) >= 5


@pytest.mark.parametrize("name", _seed_devices())
def test_seed_device_has_every_rate(name: str) -> None:
    device = get_device(name)
    assert device.memory_bandwidth_gbs.value, f"{name}: no memory bandwidth"
    assert device.memory_gb.value, f"{name}: no memory size"
    assert device.tflops["fp32"].value, f"{name}: no fp32 rate"
    assert _gaps(name) == KNOWN_GAPS.get(name, set())


def test_known_gaps_have_a_reason_in_the_catalog() -> None:
    for name, precisions in KNOWN_GAPS.items():
        for precision in precisions:
            figure = get_device(name).tflops[precision]
            assert figure.value is None and figure.note, (name, precision)


def test_derived_rates_say_so() -> None:
    for name, precisions in DERIVED.items():
        for precision in precisions:
            figure = get_device(name).tflops[precision]
            assert figure.value and figure.note.startswith("DERIVED"), (name, precision)
            fp32 = get_device(name).tflops["fp32"].value
            most = TENSOR_OVER_VECTOR.get(name, 2.01)
            assert fp32 * 0.99 <= figure.value <= fp32 * most, (name, precision)


def test_a_missing_rate_without_a_fallback_raises() -> None:
    device = get_device("m2-16gb")  # an Apple GPU has no bf16 rate in the catalog
    with pytest.raises(RateMissing, match="no bf16 compute rate"):
        _rate(device, "bf16")


def test_family_membership_is_unique_and_covers_the_catalog() -> None:
    raw = json.loads((ROOT / "src/trainfit/timing/families.json").read_text(encoding="utf-8"))
    families = raw["families"]
    listed = [d for fam in families.values() if "within" not in fam for d in fam["devices"]]
    assert len(listed) == len(set(listed)), "a device is in two families"
    for fam in families.values():  # a generation narrows its family's devices
        if "within" in fam:
            assert set(fam["devices"]) <= set(families[fam["within"]]["devices"])
    catalog = devices()
    assert set(listed) <= set(catalog)
    for name, device in catalog.items():
        if device.kind in ("cuda", "mps") and device.architecture != "hopper":
            assert name in listed, f"{name} is in no device family of families.json"
    fits = family_fits()
    assert "h100" not in fits and "h200" not in fits


def test_no_rate_stands_in_for_another() -> None:
    """A Mac has an fp16 rate and no bf16 one: bf16 is missing, not timed at the fp16 rate."""
    device = get_device("m1-pro-16gb")
    assert device.tflops["fp16"].value and not (
        device.tflops.get("bf16") and device.tflops["bf16"].value
    )
    with pytest.raises(
        RateMissing, match=r"no bf16 compute rate for .*the vendor's dense bf16 rate"
    ):
        _rate(device, "bf16")
