"""What trainfit says each sharded case needs per GPU (`trainfit.plan.beyond_one_gpu`), on this
CPU-only host: with the states sharded over each of GPUS, and with them in CPU memory.

    PYTHONPATH=src:. python -m benchmarks.sharded.predict   # writes results/predicted.json
"""

from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import torch
import transformers

from benchmarks.sharded.cases import CASES, GPUS, spec_fields
from trainfit.hardware.catalog import get_device
from trainfit.plan import beyond_one_gpu
from trainfit.spec import TrainSpec

DEVICE = "h200"
"""The card the cases were measured on (2 x H200; the catalog row gives its kernel family)."""
RESULTS = Path(__file__).parent / "results"


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
        spec = TrainSpec(**spec_fields(name))
        device = get_device(DEVICE)
        out["cases"][name] = {  # type: ignore[index]
            str(gpus): beyond_one_gpu(spec, device, gpus) for gpus in (0, 1, *GPUS)
        }
        print(name, out["cases"][name])  # type: ignore[index]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "predicted.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
