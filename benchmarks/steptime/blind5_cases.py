"""The fifth blind step-time set: the optimizer's path. Chosen after the optimizer's host cost
became path-aware (`optimizer_paths.py`, `host_fit.json` `optimizer_paths`), each case on the
for-loop, fused or (Adafactor) foreach path beside a twin on PyTorch's default path, so the
ratio of the two is measured in the same runs; their predictions
(`results/blind5_predictions.json`, and the rules before beside them) were committed before
their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind4_cases import _hf
from benchmarks.steptime.blind_cases import _plain

_SHORT = {"sgd": "sgd", "sgd-momentum": "sgdm", "adam": "adam", "adamw": "adamw"}


def _on(case: dict[str, Any], path: str | None) -> dict[str, Any]:
    """`case` on the optimizer `path` (None: PyTorch's default), in the harness and the spec."""
    if path is not None:
        case["build"]["path"] = case["spec"]["optimizer_path"] = path
    return case


def _mlp(factory: str, width: int, batch: int, optim: str, path: str | None) -> dict[str, Any]:
    build: dict[str, Any] = dict(
        factory=factory, x=(width,), classes=10, batch=batch, optim=_SHORT.get(optim, optim)
    )
    return _on(
        dict(build=build, spec=_plain(factory, f"x=B,{width}", batch, optimizer=optim)), path
    )


def _gpt2(path: str | None) -> dict[str, Any]:
    return _on(_hf("gpt2", 2, 64), path)


CASES: dict[str, dict[str, Any]] = {
    "mlp-12x128-b16-adamw-default-fp32": _mlp("mlp_12x128", 32, 16, "adamw", None),
    "mlp-12x128-b16-adamw-forloop-fp32": _mlp("mlp_12x128", 32, 16, "adamw", "for-loop"),
    "mlp-12x128-b16-adamw-fused-fp32": _mlp("mlp_12x128", 32, 16, "adamw", "fused"),
    "mlp-10x192-b16-sgdm-default-fp32": _mlp("mlp_10x192", 48, 16, "sgd-momentum", None),
    "mlp-10x192-b16-sgdm-forloop-fp32": _mlp("mlp_10x192", 48, 16, "sgd-momentum", "for-loop"),
    "mlp-8x256-b32-adafactor-default-fp32": _mlp("mlp_8x256", 64, 32, "adafactor", None),
    "mlp-8x256-b32-adafactor-foreach-fp32": _mlp("mlp_8x256", 64, 32, "adafactor", "foreach"),
    "gpt2-b2-s64-adamw-default-bf16": _gpt2(None),
    "gpt2-b2-s64-adamw-forloop-bf16": _gpt2("for-loop"),
    "gpt2-b2-s64-adamw-fused-bf16": _gpt2("fused"),
}
