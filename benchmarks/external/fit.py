"""Fit one kernel-time factor per device family on the corpus's calibration rows, predict the
held-out rows, and (later, separately) score them. Run through `python -m
benchmarks.external.compare fit|predict|report`.

The model: trainfit's per-op roofline (H100 efficiencies, the device's catalog rates) with every
device kernel's time multiplied by the family's factor; host costs unchanged. The factor is the
one that makes the median of log(predicted / measured step time) over the family's calibration
rows zero (solved by a few fixed-point steps, since host time does not scale).

Rows are left out of the fit and the scores, and listed with the reason, when the device has
no catalog row, the catalog lacks a rate the step needs, or the prediction used a fallback rate
(tf32 -> fp32, bf16 -> fp16), or the device is a Hopper GPU (those keep the H100 calibration).
"""

from __future__ import annotations

import json
import math
import platform
import statistics
from dataclasses import dataclass
from datetime import date
from typing import Any

from benchmarks.external import compare
from benchmarks.external.load import CorpusRow
from trainfit.errors import TrainfitError
from trainfit.hardware.catalog import get_device
from trainfit.timing.step import RateMissing

FAMILIES_JSON = compare.Path(__file__).parents[2] / "src/trainfit/timing/families.json"
PREDICTIONS = compare.RESULTS / "heldout_predictions.json"
REPORT = compare.RESULTS / "time_by_family.md"
FIT_STEPS = 6
UNFITTED_ARCHITECTURES = frozenset({"hopper"})
"""The H100's own calibration: Hopper devices keep factor 1."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """A row's prediction (or why there is none)."""

    row: CorpusRow
    status: str
    """"ok", or why the row is not scored."""
    unfitted: float | None = None
    """Predicted step seconds with the H100 efficiencies (factor 1)."""
    notes: tuple[str, ...] = ()


def _measured_seconds(row: CorpusRow) -> float:
    """The row's measured time of one step (from its metric)."""
    assert row.value is not None and row.batch is not None
    unit = compare.predicted_value(row, 1.0)  # the metric of a 1-second step
    if row.metric == "train_throughput_samples_per_s":
        return row.batch / row.value
    return row.value / unit


def evaluate(row: CorpusRow, cache: dict) -> Outcome:
    """The unfitted prediction of one row, or the reason it is not scored."""
    try:
        device = get_device(row.device_key)
    except TrainfitError:
        return Outcome(row, "no catalog row for the device")
    if device.architecture in UNFITTED_ARCHITECTURES:
        status = "Hopper: keeps the H100 calibration (not fitted)"
    else:
        status = "ok"
    try:
        item = compare.traced(row, cache)
        spec = compare.build_spec(row, device.name)
        timed = compare.step_time(
            item.costs,
            spec,
            device,
            item.tokens_per_sample,
            item.trainable_tensors,
            compare.calibration(),
            device_time_factor=1.0,
        )
    except RateMissing as exc:
        return Outcome(row, f"catalog lacks a rate: {exc}")
    fallback = [n for n in timed.notes if n.startswith("the catalog has no")]
    if fallback and status == "ok":
        status = "fallback rate used"
    return Outcome(row, status, timed.seconds, tuple(timed.notes))


def _fitted_seconds(outcome: Outcome, cache: dict, factor: float) -> float:
    return compare.step_seconds(outcome.row, compare.traced(outcome.row, cache), factor)


def fit_family(outcomes: list[Outcome], cache: dict) -> float:
    """The factor that zeroes the median log time ratio over `outcomes`."""
    factor = 1.0
    for _ in range(FIT_STEPS):
        logs = [
            math.log(_fitted_seconds(o, cache, factor) / _measured_seconds(o.row)) for o in outcomes
        ]
        factor *= math.exp(-statistics.median(logs))
    return factor


def _versions() -> dict[str, str]:
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def _family_devices() -> dict[str, list[str]]:
    raw = json.loads(FAMILIES_JSON.read_text())
    return {name: list(f["devices"]) for name, f in raw["families"].items()}


def fit_and_predict(rows: list[CorpusRow]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(families.json, heldout_predictions.json) as documents."""
    cache = compare._load_cache()
    outcomes = [evaluate(r, cache) for r in rows]
    families: dict[str, Any] = {}
    members = _family_devices()
    for family in sorted({r.family for r in rows} | set(members)):
        calib = [o for o in outcomes if o.row.family == family and o.row.split == "calibration"]
        usable = [o for o in calib if o.status == "ok"]
        factor = fit_family(usable, cache) if usable else None
        families[family] = {
            "devices": members.get(family, []),
            "device_time_factor": None if factor is None else round(factor, 4),
            "fitted_on": [o.row.id for o in usable],
            "left_out": {o.row.id: o.status for o in calib if o.status != "ok"},
        }
    today = date.today().isoformat()
    fams = {
        "date": today,
        "source": "benchmarks/external/corpus.yaml calibration rows (split_rule), fitted by "
        "benchmarks/external/fit.py",
        "method": "one factor per family on every device kernel's modelled time (H100 "
        "efficiencies, catalog rates); median of log(predicted/measured step time) over the "
        "family's usable calibration rows made zero; Hopper devices keep the H100 calibration",
        "versions": _versions(),
        "families": families,
    }
    predictions = []
    for o in outcomes:
        if o.row.split != "heldout":
            continue
        entry: dict[str, Any] = {"id": o.row.id, "family": o.row.family, "status": o.status}
        if o.unfitted is not None:
            factor = families.get(o.row.family, {}).get("device_time_factor")
            scored = o.status == "ok" and factor is not None
            fitted = _fitted_seconds(o, cache, factor) if scored else o.unfitted
            entry.update(
                {
                    "device": o.row.device_key,
                    "metric": o.row.metric,
                    "unit": o.row.unit,
                    "factor": factor if scored else 1.0,
                    "predicted_step_seconds": round(fitted, 6),
                    "predicted_value": round(compare.predicted_value(o.row, fitted), 4),
                    "unfitted_step_seconds": round(o.unfitted, 6),
                    "unfitted_value": round(compare.predicted_value(o.row, o.unfitted), 4),
                    "notes": list(o.notes),
                }
            )
        predictions.append(entry)
    doc = {
        "date": today,
        "versions": _versions(),
        "families_json": "src/trainfit/timing/families.json",
        "note": "Predictions of the held-out rows, committed before their errors were computed.",
        "rows": predictions,
    }
    return fams, doc


def _dump(path: compare.Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def main(command: str, rows: list[CorpusRow]) -> int:
    if command in ("fit", "predict"):
        fams, doc = fit_and_predict(rows)
        _dump(FAMILIES_JSON, fams)
        _dump(PREDICTIONS, doc)
        for name, fam in fams["families"].items():
            print(name, fam["device_time_factor"], len(fam["fitted_on"]), "rows")
        return 0
    if command == "report":
        from benchmarks.external import score

        REPORT.write_text(score.render(rows))
        return 0
    raise SystemExit(f"unknown command {command!r}: trace, fit, predict or report")
