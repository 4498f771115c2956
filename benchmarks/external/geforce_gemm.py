"""GeForce matmul efficiencies per precision, read off published large GEMMs, and the consumer
families' factors refitted with them.

    python -m benchmarks.external.geforce_gemm snapshot FILE         # consumer rows now
    python -m benchmarks.external.geforce_gemm efficiency FAMILY...  # into families.json
    python -m benchmarks.external.geforce_gemm refit BEFORE NAME FAMILY...  # results/NAME.*

`efficiency`: per card, the median over the contributors' runs in `geforce_gemm_database.json`
of their best TFLOPS over the catalog's rate; per family and precision, the median over its
cards (a card with no run at a precision does not count there). These GEMMs are calibration
data, not corpus rows. `refit`: the consumer families' factors fitted again on their corpus
calibration rows with fit.py's procedure (fit.evaluate, fit.fit_group), the held-out rows then
predicted and scored beside `BEFORE` (a `snapshot` of the library before the change); the
held-out rows were seen before (version 2's errors are committed), so the check is not blind.
`efficiency` writes the entries of the families named and removes the others' (a family whose
refit was not kept keeps the calibration GPU's efficiencies and its factors).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.external import compare, fit
from trainfit.errors import TrainfitError
from trainfit.hardware.catalog import get_device
from trainfit.timing.step import step_time

DATABASE = Path(__file__).with_name("geforce_gemm_database.json")
FAMILIES = ("consumer-ampere", "consumer-ada", "consumer-blackwell")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def efficiencies() -> dict[str, dict[str, Any]]:
    """Family -> its matmul efficiency entry for families.json (per precision, with the
    per-card figures it is the median of)."""
    raw = json.loads(DATABASE.read_text())
    per_card: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in raw["rows"]:
        if row.get("excluded"):
            continue
        device = get_device(row["device_key"])
        for precision, measured in row["tflops"].items():
            if measured is not None:
                rate = float(device.tflops[precision].value)
                per_card[row["device_key"]][precision].append(measured / rate)
    members = fit._family_devices()
    out: dict[str, dict[str, Any]] = {}
    for family in FAMILIES:
        cards = {
            card: {p: round(statistics.median(v), 4) for p, v in sorted(per_card[card].items())}
            for card in members[family]
            if card in per_card
        }
        by_precision = {
            p: round(statistics.median(c[p] for c in cards.values() if p in c), 4)
            for p in PRECISIONS
            if any(p in c for c in cards.values())
        }
        out[family] = {
            "by_precision": by_precision,
            "cards": cards,
            "source": f"{raw['source']} (seen {raw['seen']}), copied into "
            "benchmarks/external/geforce_gemm_database.json; read by "
            "benchmarks/external/geforce_gemm.py: per card the median over runs of best "
            "TFLOPS / catalog rate, per family the median over cards",
        }
    return out


def write_efficiencies(families: list[str]) -> None:
    doc = json.loads(fit.FAMILIES_JSON.read_text())
    for family, entry in efficiencies().items():
        if family in families:
            doc["families"][family]["matmul_efficiency"] = entry
        else:
            doc["families"][family].pop("matmul_efficiency", None)
    fit._dump(fit.FAMILIES_JSON, doc)


def snapshot() -> dict[str, Any]:
    """Consumer row id -> the library's prediction in the row's metric, split and family."""
    cache = compare._load_cache()
    out: dict[str, Any] = {}
    for row in compare.time_rows():
        if row.family not in FAMILIES:
            continue
        try:
            device = get_device(row.device_key)
        except TrainfitError:
            continue
        item = compare.traced(row, cache)
        spec = compare.build_spec(row, device.name)
        timed = step_time(item.costs, spec, device, item.tokens_per_sample, item.trainable_tensors)
        out[row.id] = {
            "family": row.family,
            "split": row.split,
            "measured": row.value,
            "predicted": round(compare.predicted_value(row, timed.seconds), 6),
        }
    return out


def refit(families: list[str]) -> dict[str, Any]:
    """The factors of `families` fitted again on their calibration rows (into families.json);
    the fitted groups and their rows."""
    cache = compare._load_cache()
    doc = json.loads(fit.FAMILIES_JSON.read_text())
    fitted: dict[str, Any] = {}
    for family in families:
        rows = [r for r in compare.time_rows() if r.family == family and r.split == "calibration"]
        outcomes = [fit.evaluate(r, cache) for r in rows]
        usable = [o for o in outcomes if o.status == "ok"]
        if not usable:
            continue
        factors = fit.fit_group(usable, cache, family in fit.CLASS_FIT_FAMILIES)
        entry = doc["families"][family]
        entry["device_time_factor"] = round(factors.rest, 4)
        entry["op_class_factors"] = factors.classes()
        entry["fitted_on"] = [o.row.id for o in usable]
        entry["left_out"] = {o.row.id: o.status for o in outcomes if o.status != "ok"}
        fitted[family] = {"factor": entry["device_time_factor"], "classes": factors.classes()}
    fit._dump(fit.FAMILIES_JSON, doc)
    return fitted


def _stats(errors: list[float]) -> str:
    if not errors:
        return "- | -"
    return f"{statistics.median(errors):.1%} | {max(errors):.1%}"


def scored(before: dict[str, Any], after: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Each row's error before and after, and per (family, split) median and worst."""
    rows, groups = [], defaultdict(lambda: ([], []))
    for rid, now in after.items():
        old = before[rid]
        e0 = abs(old["predicted"] / now["measured"] - 1)
        e1 = abs(now["predicted"] / now["measured"] - 1)
        groups[(now["family"], now["split"])][0].append(e0)
        groups[(now["family"], now["split"])][1].append(e1)
        rows.append(
            {
                "id": rid,
                **now,
                "before": old["predicted"],
                "error_before": round(e0, 5),
                "error_after": round(e1, 5),
            }
        )
    lines = [
        "| family | split | n | median before | worst before | median after | worst after |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (family, split), (e0, e1) in sorted(groups.items()):
        lines.append(f"| {family} | {split} | {len(e0)} | {_stats(e0)} | {_stats(e1)} |")
    return {"rows": rows}, "\n".join(lines) + "\n"


def record_checks(data: dict[str, Any], families: list[str], table: str) -> None:
    """Each refitted family's held-out errors into its families.json entry (not blind)."""
    doc = json.loads(fit.FAMILIES_JSON.read_text())
    for family in families:
        errors = [
            r["error_after"]
            for r in data["rows"]
            if r["family"] == family and r["split"] == "heldout"
        ]
        if not errors:
            doc["families"][family].pop("heldout_check", None)
            continue
        doc["families"][family]["heldout_check"] = {
            "rows": len(errors),
            "median_error": round(statistics.median(errors), 3),
            "worst_error": round(max(errors), 3),
            "table": table,
            "note": "the group's held-out rows after its factors were refitted with the "
            "family's matmul efficiencies (benchmarks/external/geforce_gemm.py); not fitted "
            "on, but seen before (not blind)",
        }
    fit._dump(fit.FAMILIES_JSON, doc)


def main(argv: list[str]) -> int:
    import __main__

    # NB: `compare trace`, run as __main__, pickled its Traced entries under that module's name
    __main__.Traced = compare.Traced  # type: ignore[attr-defined]
    command = argv[0]
    if command == "snapshot":
        Path(argv[1]).write_text(json.dumps(snapshot(), indent=1) + "\n")
    elif command == "efficiency":
        write_efficiencies(argv[1:])
    elif command == "refit":
        before, name, families = argv[1], argv[2], argv[3:]
        fitted = refit(families)
        data, table = scored(json.loads(Path(before).read_text()), snapshot())
        data["fitted"] = fitted
        out = compare.RESULTS / name
        out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
        out.with_suffix(".md").write_text(table)
        record_checks(data, families, f"benchmarks/external/results/{name}.md")
        print(table, json.dumps(fitted))
    else:
        raise SystemExit(f"unknown command {command!r}: snapshot, efficiency or refit")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
