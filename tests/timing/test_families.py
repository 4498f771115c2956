"""trainfit.timing.families: the op classes, the per-family class factors read from
families.json, and their effect on a modelled step (convolutions scaled, GEMMs not)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from trainfit.hardware.catalog import get_device
from trainfit.plan.time_words import basis_text
from trainfit.spec import Precision, TrainSpec
from trainfit.timing.constants import calibration
from trainfit.timing.families import (
    OP_CLASSES,
    check_classes,
    class_factors,
    matmul_efficiency,
    op_class,
    scale_of,
)
from trainfit.timing.step import Rates, step_time
from trainfit.trace.costs import OpKind
from trainfit.trace.step import trace_step

MLP = dict(model="tests.timing_models:two_layer_mlp", inputs=("input=B,64:float32",), loss=None)
RAW = json.loads(resources.files("trainfit.timing").joinpath("families.json").read_text())


def test_every_op_kind_has_a_class() -> None:
    assert op_class(OpKind.CONV) == "conv"
    assert op_class(OpKind.MATMUL) == op_class(OpKind.ATTENTION) == "gemm"
    assert {op_class(k) for k in OpKind} == set(OP_CLASSES)


def test_an_unknown_class_is_an_error_naming_the_classes() -> None:
    with pytest.raises(ValueError, match=r"\['tensor'\].*'conv', 'gemm', 'memory'"):
        check_classes({"tensor": 2.0})


def test_scale_of_a_class_not_listed_is_one() -> None:
    assert scale_of({"conv": 0.5}, OpKind.CONV) == 0.5
    assert scale_of({"conv": 0.5}, OpKind.MATMUL) == 1.0


def test_class_factors_come_from_the_device_family() -> None:
    for family in RAW["families"].values():
        if family["device_time_factor"] is None:
            continue
        for device in family["devices"]:
            later = [
                f
                for f in RAW["families"].values()
                if device in f["devices"] and f["device_time_factor"] is not None
            ][-1]  # a generation's entry overrides its family's
            assert class_factors(device) == later.get("op_class_factors", {})
    assert class_factors("h100") == {}


def test_a_conv_factor_scales_a_cnn_and_not_an_mlp() -> None:
    """A device-bound CNN step (batch 512) gets faster; an MLP has no convolution."""
    device = get_device("rtx-4090")
    cnn = TrainSpec(
        model="benchmarks.external.models:resnet20_cifar",
        batch=512,
        inputs=("x=B,3,32,32:float32",),
    )
    mlp = TrainSpec(**MLP, batch=4)
    for spec, moves in ((cnn, True), (mlp, False)):
        trace = trace_step(spec)
        base = step_time(trace.costs, spec, device, device_time_factor=1.0)
        half = step_time(
            trace.costs, spec, device, device_time_factor=1.0, op_class_factors={"conv": 0.5}
        )
        assert (half.seconds < base.seconds) is moves


def test_a_family_with_a_conv_factor_says_so_in_the_basis() -> None:
    spec = TrainSpec(**MLP, batch=4)
    trace = trace_step(spec)
    timed = step_time(trace.costs, spec, get_device("rtx-4090"))
    conv = class_factors("rtx-4090")["conv"]
    assert timed.basis.family is not None
    assert ("conv", conv) in timed.basis.family.class_factors
    assert f"convolutions a further x{conv:.3g} fitted on" in basis_text(timed.basis)
    assert class_factors("h100") == {}


def test_a_geforce_family_has_its_own_matmul_efficiency_and_hopper_keeps_the_calibration() -> None:
    spec = TrainSpec(**MLP, batch=4)
    cal = calibration()
    own_families = [
        n
        for n, f in RAW["families"].items()
        if f.get("matmul_efficiency") and "by_card" not in f["matmul_efficiency"]
    ]
    assert {"consumer-ada", "consumer-blackwell"} <= set(own_families)
    for family in own_families:
        entry = RAW["families"][family]["matmul_efficiency"]
        for device in RAW["families"][family]["devices"]:
            own = matmul_efficiency(device)
            assert own is not None and own.family == family and "zzc0721" in own.source
            rates = Rates(get_device(device), spec, cal)
            for precision, value in entry["by_precision"].items():
                assert own.get(precision) == value == rates.matmul_efficiency(precision)
    assert matmul_efficiency("h100") is None and matmul_efficiency("a100-80gb-pcie") is None
    rates = Rates(get_device("h100"), spec, cal)
    assert rates.matmul_efficiency("tf32") == cal.matmul_efficiency["tf32"]


def test_a_datacenter_card_with_published_gemms_has_its_own_matmul_efficiency() -> None:
    """Per card, not per family: the T4 and the A100 differ by ~2x at FP32; a card without
    published GEMMs (the A10) and a precision a card has none at (TF32) keep the calibration
    GPU's figure."""
    spec = TrainSpec(**MLP, batch=4)
    cal = calibration()
    by_card = RAW["families"]["datacenter"]["matmul_efficiency"]["by_card"]
    assert {"t4", "a100-40gb", "a100-80gb"} <= set(by_card)
    for card, figures in by_card.items():
        own = matmul_efficiency(card)
        assert own is not None and own.family == "datacenter" and "zzc0721" in own.source
        rates = Rates(get_device(card), spec, cal)
        for precision, value in figures.items():
            assert own.get(precision) == value == rates.matmul_efficiency(precision)
        assert rates.matmul_efficiency("tf32") == cal.matmul_efficiency["tf32"]
    assert by_card["t4"]["fp32"] < 0.6 < 0.9 < by_card["a100-40gb"]["fp32"]
    assert matmul_efficiency("a10") is None


def test_a_datacenter_entry_for_a_card_outside_the_family_is_an_error(tmp_path, monkeypatch):
    from trainfit.timing import families

    doc = json.loads(json.dumps(RAW))
    doc["families"]["datacenter"]["matmul_efficiency"]["by_card"]["rtx-4090"] = {"fp32": 0.6}

    class _Files:
        def joinpath(self, name: str):
            return type("F", (), {"read_text": lambda self: json.dumps(doc)})()

    monkeypatch.setattr(families.resources, "files", lambda package: _Files())
    families._efficiency_by_device.cache_clear()
    try:
        with pytest.raises(ValueError, match="rtx-4090, not a member"):
            families.matmul_efficiency("t4")
    finally:
        families._efficiency_by_device.cache_clear()


def test_tf32_is_faster_than_fp32_for_large_matmuls_on_geforce_not_only_on_hopper() -> None:
    """A GEMM-bound MLP step (batch 4096): TF32 runs on tensor cores at the family's
    efficiency, FP32 on CUDA cores at its lower one, the catalog's two rates being equal."""
    steps = {}
    for precision in (Precision.FP32, Precision.TF32):
        spec = TrainSpec(
            model="tests.timing_models:gemm_mlp",
            inputs=("input=B,1024:float32",),
            loss=None,
            batch=4096,
            precision=precision,
        )
        trace = trace_step(spec)
        steps[precision] = step_time(trace.costs, spec, get_device("rtx-4060")).seconds
    own = matmul_efficiency("rtx-4060")
    assert own is not None
    tf32, fp32 = own.get("tf32"), own.get("fp32")
    assert tf32 is not None and fp32 is not None and tf32 > 1.4 * fp32
    assert 1.2 < steps[Precision.FP32] / steps[Precision.TF32] < tf32 / fp32
