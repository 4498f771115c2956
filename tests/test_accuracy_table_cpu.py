"""The committed CPU accuracy table's estimates are what the code computes today."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from benchmarks.accuracy_cpu.cases import CASES

from trainfit import TrainSpec, estimate

RESULTS = Path(__file__).parent.parent / "benchmarks" / "accuracy_cpu" / "results"


def _recorded(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def test_every_case_is_measured_and_estimated() -> None:
    assert set(_recorded("estimates_cpu.json")["cases"]) == set(CASES)
    assert set(_recorded("measured_cpu.json")["cases"]) == set(CASES)


def _cases() -> list:
    """Every case; those that took over a second to estimate when recorded are `slow`."""
    recorded = _recorded("estimates_cpu.json")["cases"]
    seconds = {name: case["seconds"] for name, case in recorded.items()}
    slow = pytest.mark.slow
    return [n if seconds[n] <= 1.0 else pytest.param(n, marks=slow) for n in sorted(CASES)]


@pytest.mark.parametrize("name", _cases())
def test_cpu_estimate_has_not_drifted(name: str) -> None:
    transformers = pytest.importorskip("transformers")
    env = _recorded("estimates_cpu.json")["environment"]
    if (torch.__version__, transformers.__version__) != (env["torch"], env["transformers"]):
        pytest.skip(
            f"estimates were recorded with torch {env['torch']} and transformers "
            f"{env['transformers']}; this is {torch.__version__} / {transformers.__version__}"
        )
    committed = _recorded("estimates_cpu.json")["cases"][name]
    result = estimate(TrainSpec(**CASES[name], device="cpu"))
    fresh = (
        result.device_memory_needed_bytes,
        result.peak_allocated_bytes,
        result.peak_reserved_bytes,
    )
    recorded = (
        committed["device_memory_needed_bytes"],
        committed["peak_allocated_bytes"],
        committed["peak_reserved_bytes"],
    )
    assert fresh == recorded, (
        f"{name}: the CPU estimate changed; rerun `python -m benchmarks.accuracy_cpu.compare` "
        "and, if the change is intended, commit the refreshed table"
    )
