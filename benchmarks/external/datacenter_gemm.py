"""Per-card matmul efficiencies of the data-centre family, read off published large GEMMs, and
the check that they leave the family's fitted factors where they were.

    python -m benchmarks.external.datacenter_gemm efficiency   # into families.json
    python -m benchmarks.external.datacenter_gemm refit        # the factors fitted again

`efficiency`: per card, the median over the contributors' runs in
`datacenter_gemm_database.json` of their best TFLOPS over the catalog's rate, at each precision
the catalog has a rate for. One figure per card, not per family (as the GeForce families have,
geforce_gemm.py): the family's cards run FP32 GEMMs at 51-98% of their rates (a 70 W T4 ~53%,
an A100 93-98%). A card without published GEMMs keeps the calibration GPU's efficiencies;
Hopper cards keep them always (the H100 is the calibration GPU). These GEMMs are calibration
data, not corpus rows.

`refit`: the data-centre factors fitted again on the family's calibration rows with fit.py's
procedure, printed beside the shipped ones (the efficiencies move only calibration rows' fp16
matmuls, a small share of their steps; nothing is written).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.external import compare, fit
from trainfit.hardware.catalog import get_device

DATABASE = Path(__file__).with_name("datacenter_gemm_database.json")
FAMILY = "datacenter"


def efficiencies() -> dict[str, Any]:
    """The family's `matmul_efficiency` entry for families.json: per card and precision."""
    raw = json.loads(DATABASE.read_text())
    runs: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[str, int] = defaultdict(int)
    for row in raw["rows"]:
        device = get_device(row["device_key"])
        if device.architecture in fit.UNFITTED_ARCHITECTURES:
            raise ValueError(f"{row['device_key']}: Hopper keeps the calibration GPU's figures")
        counts[row["device_key"]] += 1
        for precision, measured in row["tflops"].items():
            figure = device.tflops.get(precision)
            if figure is None or not figure.value:
                raise ValueError(f"{row['device_key']}: the catalog has no {precision} rate")
            runs[row["device_key"]][precision].append(measured / float(figure.value))
    by_card = {
        card: {p: round(statistics.median(v), 4) for p, v in sorted(found.items())}
        for card, found in sorted(runs.items())
    }
    return {
        "by_card": by_card,
        "runs": dict(sorted(counts.items())),
        "source": f"{raw['source']} (seen {raw['seen']}), copied into "
        "benchmarks/external/datacenter_gemm_database.json; read by "
        "benchmarks/external/datacenter_gemm.py: per card the median over runs of best "
        "TFLOPS / catalog rate",
    }


def write_efficiencies() -> None:
    doc = json.loads(fit.FAMILIES_JSON.read_text())
    doc["families"][FAMILY]["matmul_efficiency"] = efficiencies()
    fit._dump(fit.FAMILIES_JSON, doc)


def refit() -> dict[str, Any]:
    """The family's factors fitted again on its calibration rows, beside the shipped ones."""
    cache = compare._load_cache()
    rows = [r for r in compare.time_rows() if r.family == FAMILY and r.split == "calibration"]
    outcomes = [fit.evaluate(r, cache) for r in rows]
    usable = [o for o in outcomes if o.status == "ok"]
    factors = fit.fit_group(usable, cache, True)
    shipped = json.loads(fit.FAMILIES_JSON.read_text())["families"][FAMILY]
    return {
        "refitted": {"factor": round(factors.rest, 4), "classes": factors.classes()},
        "shipped": {
            "factor": shipped["device_time_factor"],
            "classes": shipped["op_class_factors"],
        },
        "rows": [o.row.id for o in usable],
    }


def main(argv: list[str]) -> int:
    import __main__

    # NB: `compare trace`, run as __main__, pickled its Traced entries under that module's name
    __main__.Traced = compare.Traced  # type: ignore[attr-defined]
    command = argv[0] if argv else ""
    if command == "efficiency":
        write_efficiencies()
    elif command == "refit":
        print(json.dumps(refit(), indent=1))
    else:
        raise SystemExit(f"unknown command {command!r}: efficiency or refit")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
