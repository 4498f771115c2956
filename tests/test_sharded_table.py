"""The committed sharded/offloaded predictions (benchmarks/sharded/) are what the code computes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from benchmarks.sharded.cases import CASES
from benchmarks.sharded.predict import predict_case

from trainfit.memory.runtime import nccl_bytes

PREDICTED = Path(__file__).parent.parent / "benchmarks" / "sharded" / "results" / "predicted.json"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_sharded_prediction_has_not_drifted(name: str) -> None:
    recorded = json.loads(PREDICTED.read_text())
    fresh = predict_case(name)
    # sharding never adds memory per GPU; the states in CPU memory leave the least, NCCL's
    # buffers included
    assert fresh["0"] < fresh["2"] < fresh["1"] + nccl_bytes(2)
    assert fresh["0"] > nccl_bytes(1)
    if recorded["environment"]["torch"] != torch.__version__:
        pytest.skip(f"recorded with torch {recorded['environment']['torch']}")
    assert fresh == recorded["cases"][name], (
        f"{name}: rerun `python -m benchmarks.sharded.predict` and `compare` if intended"
    )
