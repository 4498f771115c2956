"""trainfit.timing.families: the op classes, the per-family class factors read from
families.json, and their effect on a modelled step (convolutions scaled, GEMMs not)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from trainfit.hardware.catalog import get_device
from trainfit.plan.time_words import basis_text
from trainfit.spec import TrainSpec
from trainfit.timing.families import (
    OP_CLASSES,
    check_classes,
    class_factors,
    op_class,
    scale_of,
)
from trainfit.timing.step import step_time
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
