"""Every reproducible time row on a catalog device, modelled by the library as it stands (its
family factors, nothing refitted), before and after a change to the step-time model.

    python -m benchmarks.external.recheck_gemm snapshot FILE   # the current predictions
    python -m benchmarks.external.recheck_gemm compare BEFORE  # results/gemm_fixed_recheck.*
    python -m benchmarks.external.recheck_gemm heldout OUT     # version 2's held-out rows now

Written for the GEMM fixed cost's change from FLOPs to seconds (benchmarks/timing/gemm_fixed.py):
`snapshot` ran on the commit before it, `compare` after; both splits are listed, each error
|predicted / measured - 1| in the row's metric, per family and split.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.external import compare
from trainfit.errors import TrainfitError
from trainfit.hardware.catalog import get_device
from trainfit.timing.step import step_time

OUT = Path(__file__).parent / "results" / "gemm_fixed_recheck"


def snapshot() -> dict[str, Any]:
    """Row id -> the library's prediction in the row's metric (or why there is none)."""
    cache = compare._load_cache()
    out: dict[str, Any] = {}
    for row in compare.time_rows():
        try:
            device = get_device(row.device_key)
        except TrainfitError:
            continue
        item = compare.traced(row, cache)
        spec = compare.build_spec(row, device.name)
        try:
            timed = step_time(
                item.costs, spec, device, item.tokens_per_sample, item.trainable_tensors
            )
        except TrainfitError as exc:
            out[row.id] = {"error": str(exc)}
            continue
        out[row.id] = {"predicted": round(compare.predicted_value(row, timed.seconds), 6)}
    return out


def _stats(errors: list[float]) -> str:
    if not errors:
        return "- | -"
    return f"{statistics.median(errors):.1%} | {max(errors):.1%}"


def compare_to(before: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Before and after per row, and per (family, split) median and worst error."""
    after = snapshot()
    by_id = {r.id: r for r in compare.time_rows()}
    rows, groups = [], defaultdict(lambda: ([], []))
    for rid, now in after.items():
        old = before.get(rid, {})
        if "predicted" not in now or "predicted" not in old:
            continue
        row = by_id[rid]
        assert row.value is not None
        e0 = abs(old["predicted"] / row.value - 1)
        e1 = abs(now["predicted"] / row.value - 1)
        key = (row.family, row.split, str(dict(row.trainfit_model or {})["precision"]))
        groups[key][0].append(e0)
        groups[key][1].append(e1)
        rows.append(
            {
                "id": rid,
                "family": row.family,
                "split": row.split,
                "device": row.device_key,
                "measured": row.value,
                "before": old["predicted"],
                "after": now["predicted"],
                "error_before": round(e0, 5),
                "error_after": round(e1, 5),
            }
        )
    lines = [
        "| family | split | precision | n | median / worst before | median / worst after |",
        "|---|---|---|---:|---|---|",
    ]
    for (family, split, precision), (e0, e1) in sorted(groups.items()):
        lines.append(
            f"| {family} | {split} | {precision} | {len(e0)} | {_stats(e0)} | {_stats(e1)} |"
        )
    return {"rows": rows}, "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    import __main__

    # NB: `compare trace`, run as __main__, pickled its Traced entries under that module's name
    __main__.Traced = compare.Traced  # type: ignore[attr-defined]
    command, path = argv
    if command == "heldout":
        from benchmarks.external import recheck

        doc = recheck.recheck()
        doc["what"] = (
            "held-out predictions of model version 2 recomputed after a matmul's fixed cost "
            "became a time (seconds) instead of FLOPs at the device's rate; family factors "
            "not refitted, no held-out row used to fit anything"
        )
        Path(path).write_text(json.dumps(doc, indent=1) + "\n")
        return 0
    if command == "snapshot":
        Path(path).write_text(json.dumps(snapshot(), indent=1) + "\n")
        return 0
    data, table = compare_to(json.loads(Path(path).read_text()))
    OUT.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    OUT.with_suffix(".md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
