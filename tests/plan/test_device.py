"""One device's plan (`trainfit.plan.device`): the faster of bf16 and fp16 autocast."""

from __future__ import annotations

import pytest

from trainfit import TrainSpec
from trainfit.plan.options import FasterFp16
from trainfit.plan.search import plan
from trainfit.plan.words import changes_text
from trainfit.spec import Precision


@pytest.mark.slow
def test_a_batchnorm_network_is_planned_in_fp16_where_that_is_faster() -> None:
    # NB: CUDA runs a bf16 batch norm with PyTorch's own kernels, an fp16 one with cuDNN's
    spec = TrainSpec(model="trainfit.models.zoo:redimnet_like")
    result = plan(spec, effective_batch=32, devices=["rtx-4090"])
    (device,) = result.devices
    assert device.setting is not None
    assert device.setting.precision is Precision.FP16
    (faster,) = [c for c in device.changes if isinstance(c, FasterFp16)]
    assert faster.fp16_seconds <= 0.9 * faster.bf16_seconds
    assert device.step_time is not None
    assert device.step_time.seconds == pytest.approx(faster.fp16_seconds)
    assert any(text.startswith("fp16 autocast with loss scaling") for text in changes_text(device))


@pytest.mark.slow
def test_a_precision_asked_for_is_kept_even_where_fp16_is_faster() -> None:
    spec = TrainSpec(model="trainfit.models.zoo:redimnet_like")
    result = plan(spec, effective_batch=32, devices=["rtx-4090"], precision=Precision.BF16)
    (device,) = result.devices
    assert device.setting is not None
    assert device.setting.precision is Precision.BF16
    assert not any(isinstance(c, FasterFp16) for c in device.changes)


@pytest.mark.slow
def test_a_network_without_batch_norm_stays_in_bf16() -> None:
    result = plan(TrainSpec(model="trainfit.models.zoo:melody_transformer"), 8, ["h100"])
    (device,) = result.devices
    assert device.setting is not None
    assert device.setting.precision is Precision.BF16
    assert not any(isinstance(c, FasterFp16) for c in device.changes)
