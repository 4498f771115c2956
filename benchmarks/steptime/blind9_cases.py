"""The ninth blind step-time set: batch-norm networks under fp16 autocast, chosen after the fp16
batch-norm rule (`calibration.json` `norm_fp16_time_over_fp32`, read off `kernel_grid.py`'s
device-bound rows: an fp16 batch norm takes 0.94 of the same batch norm's fp32 time forward and
0.75 backward, where the model had half) was written: ResNets, the VQ autoencoder and the
speaker CNN at batches and sizes of no earlier table, with GradScaler. Their
predictions, by the rules before (`results/blind9_previous_rules.json`) and after
(`results/blind9_predictions.json`), were committed before their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind6_cases import _SHORT
from benchmarks.steptime.blind8_cases import _zoo
from benchmarks.steptime.blind_cases import _plain


def _cnn(
    factory: str, inputs: str, batch: int, classes: int, precision: str, optim: str = "adamw"
) -> dict[str, Any]:
    """A model of `benchmarks.steptime.models` on image inputs, under autocast where
    `precision` is fp16 (with a GradScaler) or bf16."""
    dims = tuple(int(d) for d in inputs.split(",")[1:])
    build: dict[str, Any] = dict(
        factory=factory, x=dims, classes=classes, batch=batch, optim=_SHORT[optim]
    )
    if precision != "fp32":
        build["half"] = precision
    spec = _plain(factory, f"x={inputs}", batch, precision=precision, optimizer=optim)
    return dict(build=build, spec=spec)


CASES: dict[str, dict[str, Any]] = {
    "resnet18-fp16-b64-160px": _cnn("resnet18", "B,3,160,160", 64, 1000, "fp16"),
    "resnet18-fp16-b32-96px-sgdm": _cnn("resnet18", "B,3,96,96", 32, 1000, "fp16", "sgd-momentum"),
    "resnet50-fp16-b32": _zoo("resnet50", 32, "fp16"),
    "redimnet-fp16-b16": _zoo("redimnet_like", 16, "fp16"),
    "redimnet-fp16-b96": _zoo("redimnet_like", 96, "fp16"),
    "vq-fp16-b8-x16": _zoo("vq_patch_autoencoder", 8, "fp16", multiplier=16),
    "vq-fp16-b32-x16": _zoo("vq_patch_autoencoder", 32, "fp16", multiplier=16),
}
