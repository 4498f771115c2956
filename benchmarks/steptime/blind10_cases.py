"""The tenth blind step-time set: convolutional networks with few channels, chosen after the
convolution channel curve (`calibration.json` `conv_channel_curve`, read off `conv_grid.py`'s
profiled convolutions) and the profiled fp16 batch-norm ratio were written: CIFAR- and
MNIST-sized CNNs, the VQ autoencoder and the speaker CNN in bf16 and fp32, and a ResNet-18
control, each different in model or setting from every earlier table. Their predictions, by the
rules before (`results/blind10_previous_rules.json`) and after (`results/blind10_predictions.json`),
were committed before their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind8_cases import _zoo
from benchmarks.steptime.blind9_cases import _cnn

CASES: dict[str, dict[str, Any]] = {
    "bn-cnn-fp16-b512-32px": _cnn("bn_cnn", "B,3,32,32", 512, 10, "fp16"),
    "tiny-cnn-fp32-b512": _cnn("tiny_cnn", "B,1,28,28", 512, 10, "fp32"),
    "small-cnn-bf16-b256-32px": _cnn("small_cnn", "B,3,32,32", 256, 10, "bf16"),
    "vq-bf16-b16-x16": _zoo("vq_patch_autoencoder", 16, "bf16", multiplier=16),
    "vq-fp32-b64-x8": _zoo("vq_patch_autoencoder", 64, multiplier=8),
    "redimnet-bf16-b48": _zoo("redimnet_like", 48, "bf16"),
    "redimnet-fp32-b24": _zoo("redimnet_like", 24),
    # control: 64-512 channels, which the curve leaves alone but for the stem
    "resnet18-fp32-b48-112px-sgdm": _cnn(
        "resnet18", "B,3,112,112", 48, 1000, "fp32", "sgd-momentum"
    ),
}
