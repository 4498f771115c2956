"""`trainfit.hardware.probe`: the real tiny training step on this machine."""

from __future__ import annotations

import math

import pytest
import torch

from trainfit.hardware.probe import TorchProbe, tiny_train_step


def test_real_tiny_step_on_the_cpu() -> None:
    state = torch.get_rng_state()
    first = tiny_train_step("cpu", bf16_autocast=False)
    assert torch.equal(torch.get_rng_state(), state)  # the global random state is untouched
    again = TorchProbe().tiny_train_step("cpu", bf16_autocast=False)
    assert first.params_changed and math.isfinite(first.loss)
    assert first.loss == again.loss  # fixed seed: the same weights and batch
    # cross-entropy of 4 classes from a small random init starts near ln 4
    assert first.loss == pytest.approx(math.log(4), rel=0.1)
    bf16 = tiny_train_step("cpu", bf16_autocast=True)
    assert bf16.bf16_autocast and bf16.params_changed
    assert bf16.loss == pytest.approx(first.loss, rel=0.02)


def test_real_tiny_step_on_a_missing_device_raises() -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only path")
    with pytest.raises((RuntimeError, AssertionError), match=r"CUDA|Torch not compiled"):
        tiny_train_step("cuda:0", bf16_autocast=False)
