"""The committed held-out predictions (`results/heldout_predictions_v2.json`) recomputed with
the library's current step-time model, row by row, the family factors unchanged (not refitted).

The predictions were committed before their errors; the host floor fitted afterwards on whole
H100 steps (src/trainfit/timing/host_fit.json) moves every modelled step a little. This
records by how much, and each family's held-out errors now, beside the committed ones:

    python -m benchmarks.external.recheck    # writes results/heldout_recheck_host_floor.json
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.external import compare, fit
from benchmarks.external.load import load_corpus
from trainfit.hardware.catalog import get_device
from trainfit.timing.step import step_time

OUT = Path(__file__).parent / "results" / "heldout_recheck_host_floor.json"


def recheck() -> dict[str, Any]:
    """Each scored held-out row's committed and current prediction and error, and each
    family's median and worst error, committed and current."""
    by_id = {r.id: r for r in load_corpus()}
    cache = compare._load_cache()
    rows, errors = [], defaultdict(list)
    for entry in json.loads(fit.PREDICTIONS.read_text())["rows"]:
        if "predicted_value" not in entry or entry["status"].startswith("no catalog"):
            continue
        row = by_id[entry["id"]]
        device = get_device(row.device_key)
        item = compare.traced(row, cache)
        spec = compare.build_spec(row, device.name)
        timed = step_time(item.costs, spec, device, item.tokens_per_sample, item.trainable_tensors)
        now = compare.predicted_value(row, timed.seconds)
        hopper = entry["status"].startswith("Hopper")
        family = f"{row.family} (Hopper)" if hopper else row.family
        committed_error = abs(entry["predicted_value"] / row.value - 1)
        error = abs(now / row.value - 1)
        errors[family].append((committed_error, error))
        rows.append(
            {
                "id": row.id,
                "family": family,
                "measured": row.value,
                "committed_prediction": entry["predicted_value"],
                "prediction_now": round(now, 6),
                "moved": round(now / entry["predicted_value"] - 1, 5),
                "committed_error": round(committed_error, 5),
                "error_now": round(error, 5),
            }
        )
    families = {
        family: {
            "rows": len(pairs),
            "committed_median": round(statistics.median(a for a, _ in pairs), 5),
            "median_now": round(statistics.median(b for _, b in pairs), 5),
            "committed_worst": round(max(a for a, _ in pairs), 5),
            "worst_now": round(max(b for _, b in pairs), 5),
        }
        for family, pairs in errors.items()
    }
    return {
        "what": "held-out predictions recomputed after the host floor (host_fit.json); "
        "family factors not refitted, no held-out row used to fit anything",
        "families": families,
        "rows": rows,
    }


def main() -> int:
    OUT.write_text(json.dumps(recheck(), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
