"""`estimate_forward` and `estimate_serving` of a live module: the same figures as its import
path, named by its class; their arguments' types checked, one line each."""

from __future__ import annotations

import pytest
import torch

from trainfit.errors import SpecError, UnknownNameError
from trainfit.estimator.forward import ForwardEstimate, estimate_forward, estimate_serving
from trainfit.models.zoo import emotion_mlp
from trainfit.spec import TrainSpec

MLP = "trainfit.models.zoo:emotion_mlp"
NAMED = TrainSpec(model=MLP, inputs=("x=B,128:float32",))


def test_a_live_module_s_forward_is_its_import_path_s() -> None:
    net = emotion_mlp()
    sample = torch.randn(6, 128)
    live = estimate_forward(model=net, sample=sample, precision="fp32", device="rtx-4060")
    named = estimate_forward(NAMED, batch=6, precision="fp32", device="rtx-4060")
    assert live.batch == 6  # NB: the sample's rows
    assert live.device_memory_needed_bytes == named.device_memory_needed_bytes
    assert live.seconds == named.seconds and live.flops == named.flops
    assert live.model == "_EmotionMLP (live module)" and named.model == MLP
    # a module in spec's place is the model; `batch` replaces the sample's rows
    positional = estimate_forward(net, sample=sample, batch=2, device="rtx-4060")  # type: ignore[arg-type]
    assert positional.batch == 2
    assert estimate_forward(NAMED, device="rtx-4060").batch == 1  # NB: a TrainSpec's default


def test_a_live_module_is_served_as_its_forward() -> None:
    rows = estimate_serving(
        model=emotion_mlp(), sample=torch.randn(2, 128), devices="rtx-4060",
        precisions=["fp32", "int4"], batches=4,
    )  # fmt: skip
    assert [type(r).__name__ for r in rows] == ["ForwardEstimate", "ServingRefusal"]
    assert all(r.model == "_EmotionMLP (live module)" for r in rows)
    assert isinstance(rows[0], ForwardEstimate) and rows[0].batch == 4


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: estimate_serving("gpt2", devices="h100", precisions="bf16", batches=1),
            SpecError,
            "estimate_serving: spec must be a TrainSpec, got str: give one, or its fields as "
            "keyword arguments: estimate_serving(model=module, sample=batch)",
        ),
        (
            lambda: estimate_serving(NAMED, devices="h100", precisions="bf16", batches="4"),
            SpecError,
            "estimate_serving: batches must be one int or a non-empty list of them, got '4'",
        ),
        (
            lambda: estimate_serving(NAMED, devices="h100", precisions=[3], batches=1),
            SpecError,
            "estimate_serving: precisions must be one str or InferencePrecision or a non-empty "
            "list of them, got [3]",
        ),
        (
            lambda: estimate_serving(
                NAMED, devices="h100", precisions="bf16", batches=1, context="128"
            ),
            SpecError,
            "estimate_serving: context must be an int, got str: tokens, or None",
        ),
        (
            lambda: estimate_serving(model=MLP, device="h100", precisions="bf16", batches=1),
            UnknownNameError,
            "unknown estimate_serving argument 'device'; did you mean 'devices'?",
        ),
        (
            lambda: estimate_forward(model=emotion_mlp()),
            SpecError,
            "model is a live _EmotionMLP: give its batch too, e.g. "
            "estimate_forward(model=module, sample=torch.randn(8, 4))",
        ),
    ],
)
def test_a_wrong_argument_is_one_line(call, error: type[Exception], message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error) as raised:
        call()
    assert str(raised.value).startswith(message)
