"""Estimate against a real GPU: ratio checks with stated tolerances (runs only with CUDA).

Each measurement runs in a fresh process, as the accuracy harness does, so that no other test's
cached blocks or library handles are counted. The tolerances are the issue's targets for the
headline (8% on device memory needed) and tighter for allocated memory, which has no
allocator or context modelling in it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainfit import TrainSpec, estimate

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "gpt2-bf16-small": dict(model="gpt2", batch=2, seq_len=256, precision="bf16"),
    "mlp-fp32": dict(model="trainfit.models.zoo:emotion_mlp", batch=4096, precision="fp32"),
    "transformer-ckpt-fp16": dict(
        model="trainfit.models.zoo:melody_transformer",
        batch=8,
        seq_len=256,
        precision="fp16",
        checkpointing=True,
    ),
}

_MEASURE = """
import json, sys
from benchmarks.accuracy.measure_gpu import measurement_record
from trainfit import TrainSpec
from trainfit.measure.steps import measure
m = measure(TrainSpec(**json.loads(sys.argv[1])), steps=3, warmup=0, device="cuda")
print(json.dumps({k: v for k, v in measurement_record(m).items() if k.endswith("_bytes")}))
"""


def _measure(kwargs: dict[str, object]) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, json.dumps(kwargs)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_estimate_matches_the_gpu(name: str) -> None:
    kwargs = CASES[name]
    # NB: what other processes hold on the card while the measuring process runs (this test
    # process's own CUDA context among them, once any test has touched the GPU)
    free, total = torch.cuda.mem_get_info(0)
    measured = _measure(kwargs)
    name_of_card = torch.cuda.get_device_name(0)
    device = "h100" if "H100" in name_of_card else "a100-80gb"
    predicted = estimate(TrainSpec(**kwargs, device=device))
    allocated = predicted.peak_allocated_bytes / measured["peak_allocated_bytes"]
    held = measured["device_used_bytes"] - (total - free)
    needed = predicted.device_memory_needed_bytes / held
    assert 0.97 <= allocated <= 1.03, f"{name} on {name_of_card}: allocated ratio {allocated:.3f}"
    assert 0.92 <= needed <= 1.08, f"{name} on {name_of_card}: device memory ratio {needed:.3f}"
