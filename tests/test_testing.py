"""`trainfit.testing.assert_fits`: passes with the estimate, fails with one paragraph naming
the memory needed and the memory usable."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainfit.errors import SpecError, UnknownNameError
from trainfit.hardware.catalog import get_device
from trainfit.testing import assert_fits

GIB = 2**30


def classifier(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(512, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def sample() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(4, 512), torch.randint(0, 10, (4,))


def test_a_model_that_fits_returns_its_estimate() -> None:
    result = assert_fits(
        classifier(1024),
        sample(),
        device="rtx-4060",
        batch=32,
        precision="bf16",
        loss_fn=nn.functional.cross_entropy,
    )
    assert result.spec.batch == 32 and result.device.name == "rtx-4060"
    assert result.fits is True
    assert 0 < result.device_memory_needed_bytes < get_device("rtx-4060").memory_bytes


def test_the_batch_defaults_to_the_sample_rows() -> None:
    result = assert_fits(
        classifier(64), sample(), device="h100", loss_fn=nn.functional.cross_entropy
    )
    assert result.spec.batch == 4


def test_a_model_too_large_fails_with_needed_and_usable() -> None:
    with torch.device("meta"):  # NB: a live module without its 2 GB of weights
        model = nn.Sequential(*[nn.Linear(8192, 8192) for _ in range(8)])  # 537M parameters
    with pytest.raises(AssertionError) as failed:
        assert_fits(model, torch.randn(2, 8192), device="rtx-4060", margin=0.1)
    message = str(failed.value)
    memory = get_device("rtx-4060").memory_bytes
    assert message.startswith(
        "one training step of Sequential at batch 2 (fp32, adamw) does not fit "
        "NVIDIA GeForce RTX 4060 8GB: it needs "
    )
    assert (
        f"GiB of device memory, and {0.9 * memory / GIB:.2f} GiB of the device's "
        f"{memory / GIB:.2f} GiB is usable (keeping 10% free)"
    ) in message
    # fp32 weights and gradients and two AdamW moments: 16 bytes a parameter
    needed = float(message.split("it needs ")[1].split(" GiB")[0])
    assert needed > 16 * 537_001_984 / GIB
    assert "The largest part is " in message and "`trainfit plan`" in message
    assert "\n" not in message


def test_the_margin_turns_a_fit_into_a_failure() -> None:
    args = (classifier(1024), sample())
    kwargs = dict(device="rtx-4060", batch=32, loss_fn=nn.functional.cross_entropy)
    needed = assert_fits(*args, **kwargs).device_memory_needed_bytes  # type: ignore[arg-type]
    margin = 1.0 - needed / get_device("rtx-4060").memory_bytes + 0.01
    with pytest.raises(AssertionError, match=r"is usable \(keeping \d+% free\)"):
        assert_fits(*args, margin=margin, **kwargs)  # type: ignore[arg-type]


def test_a_catalog_model_by_name() -> None:
    result = assert_fits("trainfit.models.zoo:emotion_mlp", device="rtx-4060", batch=8)
    assert result.fits is True


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: assert_fits(classifier(8), sample(), margin=1.0), SpecError, "margin must be"),
        (lambda: assert_fits(classifier(8)), SpecError, "needs a sample batch"),
        (lambda: assert_fits("gpt2", sample()), SpecError, "takes no sample"),
        (lambda: assert_fits(42), SpecError, "model is a int: give an nn.Module"),
        (lambda: assert_fits(classifier(8), sample(), precision="fp12"), UnknownNameError, "fp12"),
    ],
)
def test_bad_arguments_are_errors_not_failures(call, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        call()
