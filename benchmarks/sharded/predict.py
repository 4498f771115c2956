"""What trainfit says each sharded case needs per GPU (`trainfit.distributed.rank_memory`, FSDP2),
on this CPU-only host: with the states sharded over each of GPUS ("2"), FSDP2 on one GPU ("1")
and with them in CPU memory on one GPU ("0", CPUOffloadPolicy).

    PYTHONPATH=src:. python -m benchmarks.sharded.predict   # writes results/predicted.json
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import platform
from pathlib import Path

import torch
import transformers

from benchmarks.sharded.cases import CASES, GPUS, spec_fields
from trainfit.distributed import Layout, Offload, Strategy, rank_memory, units
from trainfit.distributed.memory import traced_precision
from trainfit.hardware.catalog import get_device
from trainfit.spec import TrainSpec
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target

DEVICE = "h200"
"""The card the cases were measured on (2 x H200; the catalog row gives its kernel family)."""
RESULTS = Path(__file__).parent / "results"


def predict_case(name: str) -> dict[str, int]:
    """Per-rank device memory of case `name` by GPU count ("0": one GPU with CPU offload)."""
    spec = TrainSpec(**spec_fields(name))
    device = get_device(DEVICE)
    # NB: FSDP2 runs the step in bf16 (MixedPrecisionPolicy, no autocast): traced so
    traced = traced_precision(Strategy.FSDP2, spec.precision)
    trace = trace_step(dataclasses.replace(spec, precision=traced), target=Target.of(device))
    sizes = units(spec)
    shares = {}
    for gpus in (0, 1, *GPUS):
        offload = Offload.PARAMS if gpus == 0 else Offload.NONE
        layout = Layout(gpus=max(gpus, 1))
        shares[str(gpus)] = rank_memory(
            trace, spec, device, Strategy.FSDP2, offload, layout, sizes, traced
        ).total_bytes
    return shares


def main() -> None:
    out: dict[str, object] = {
        "environment": {
            "date": datetime.date.today().isoformat(),
            "host": f"{platform.system()} {platform.machine()}, CPU only",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "cases": {},
    }
    for name in CASES:
        shares = predict_case(name)
        out["cases"][name] = shares  # type: ignore[index]
        print(name, out["cases"][name])  # type: ignore[index]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "predicted.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
