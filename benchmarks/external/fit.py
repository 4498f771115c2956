"""Fit the per-family kernel-time factors on the corpus's calibration rows and predict the
held-out rows (scored later, separately). Run through `python -m benchmarks.external.compare
fit|predict|report`.

Version 2 of the model (the first, one factor per family, is kept in results/ with its
predictions and errors):

- NVIDIA families (consumer Ampere, consumer Ada, data centre): two factors, one on the
  convolutions' modelled time and one on every other kernel's (GEMMs, attention and
  memory-bound kernels), because on every non-Hopper card the H100's convolution fit is
  ~1.4-1.6x slower than measured relative to its GEMMs (ResNet-50 against BERT-large rows
  of one harness on one card). Stored as the family's factor (the "rest") and an
  op-class factor for "conv" relative to it (trainfit.timing.families).
- Apple silicon: one factor per GPU generation that has calibration rows (M1, M3), and the
  family's factor for the others (M2, M4); every Apple calibration row left is a ResNet-50,
  so convolution, GEMM and memory-bound kernels cannot be told apart and get one factor.
- Rows run on pre-release MPS builds (the torch 1.12/1.13 nightlies of 2022, before MPS left
  preview) are not fitted on: MPS then ran unoptimised or broken paths (rasbt's May 2022
  runs report 0% test accuracy; the same M1 Max runs one script 2.3x faster on torch 2.4).

Each factor minimises the sum of |log(predicted / measured step time)| over its calibration
rows (a median-like, outlier-robust criterion), found on a log grid of factors 0.2-5 in 2%
steps: on the full model for one factor; for two, over the whole grid on each row's split of
its modelled step into convolution and other kernel time (the NVIDIA rows are device-bound,
the step linear in both factors), the residuals then recomputed on the full model.

Rows are left out of the fit and listed with the reason when the device has no catalog
row, the catalog lacks a rate the step needs, the prediction used a fallback rate
(tf32 -> fp32, bf16 -> fp16), the device is a Hopper GPU (those keep the H100
calibration), or the row ran on a pre-release MPS build.
"""

from __future__ import annotations

import json
import math
import platform
import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from benchmarks.external import compare
from benchmarks.external.load import CorpusRow
from trainfit.errors import TrainfitError
from trainfit.hardware.catalog import get_device
from trainfit.plan.time_words import time_note_text
from trainfit.timing.missing import RateMissing

FAMILIES_JSON = compare.Path(__file__).parents[2] / "src/trainfit/timing/families.json"
PREDICTIONS_V1 = compare.RESULTS / "heldout_predictions.json"
"""Version 1's held-out predictions (one factor per family), kept as committed."""
PREDICTIONS = compare.RESULTS / "heldout_predictions_v2.json"
REPORT = compare.RESULTS / "time_by_family.md"
PREDICTIONS_COMMIT = "f2fe6b2"
"""The commit that holds version 2's held-out predictions (before their errors)."""
UNFITTED_ARCHITECTURES = frozenset({"hopper"})
"""The H100's own calibration: Hopper devices keep factor 1."""
CLASS_FIT_FAMILIES = frozenset({"consumer-ampere", "consumer-ada", "datacenter"})
"""Families fitted with a convolution factor beside the factor on every other kernel."""
GENERATIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "apple-silicon-m1": ("apple-silicon", ("m1-pro-16gb", "m1-max-32c", "m1-ultra", "m1-max-24c")),
    "apple-silicon-m3": ("apple-silicon", ("m3-max", "m3-pro-14c")),
}
"""Sub-families fitted on their own calibration rows: name -> (family, catalog devices)."""
PRERELEASE_MPS = re.compile(r"torch[ -]1\.1[23]\.0\.dev2022")
PRERELEASE = "pre-release MPS build (a torch nightly of 2022): not fitted on"
GRID = tuple(
    math.exp(math.log(0.2) + i * (math.log(5.0) - math.log(0.2)) / 160) for i in range(161)
)
"""Candidate factors, 0.2 to 5 in steps of 2% (log-spaced)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """A row's prediction (or why there is none)."""

    row: CorpusRow
    status: str
    """"ok", or why the row is not fitted on (held-out rows with a status are still scored
    where they have a prediction)."""
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
    elif PRERELEASE_MPS.search(row.software or ""):
        status = PRERELEASE
    else:
        status = "ok"
    try:
        item = compare.traced(row, cache)
        unfitted = compare.step_seconds(row, item, 1.0)
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
        notes = [time_note_text(n) for n in timed.notes]
    except RateMissing as exc:
        return Outcome(row, f"catalog lacks a rate: {exc}")
    fallback = [n for n in notes if n.startswith("the catalog has no")]
    if fallback and status == "ok":
        status = "fallback rate used"
    return Outcome(row, status, unfitted, tuple(notes))


@dataclass(frozen=True, slots=True)
class Factors:
    """A fitted group's factors: `rest` on every kernel, `conv` on convolutions (absolute)."""

    rest: float
    conv: float

    def classes(self) -> dict[str, float]:
        """The op-class factors relative to `rest` (trainfit.timing.families)."""
        return {} if self.conv == self.rest else {"conv": round(self.conv / self.rest, 4)}


def _seconds(o: Outcome, cache: dict, f: Factors) -> float:
    item = compare.traced(o.row, cache)
    return compare.step_seconds(o.row, item, round(f.rest, 4), f.classes() or None)


def _loss(outcomes: list[Outcome], cache: dict, f: Factors) -> float:
    return sum(abs(math.log(_seconds(o, cache, f) / _measured_seconds(o.row))) for o in outcomes)


def _split(o: Outcome, cache: dict) -> tuple[float, float, float]:
    """(convolution seconds, other seconds, measured seconds) of a row's modelled step at
    factor 1, read off the full model at conv x1 and x2 (the rows are device-bound, so the
    step is linear in the two factors)."""
    base = _seconds(o, cache, Factors(1.0, 1.0))
    conv = _seconds(o, cache, Factors(1.0, 2.0)) - base
    return conv, base - conv, _measured_seconds(o.row)


def fit_group(outcomes: list[Outcome], cache: dict, with_conv: bool) -> Factors:
    """The factors minimising the sum of |log(predicted / measured)| over `outcomes`: a
    one-dimensional search on the full model, or, with a convolution factor, a search over
    the whole two-dimensional grid on the rows' linear split (checked afterwards by the
    full model in the report's calibration residuals)."""
    if not with_conv:
        losses = {r: _loss(outcomes, cache, Factors(r, r)) for r in GRID}
        both = _centre([(r,) for r in GRID], [losses[r] for r in GRID])[0]
        return Factors(both, both)
    parts = [_split(o, cache) for o in outcomes]

    def loss(conv: float, rest: float) -> float:
        return sum(abs(math.log((conv * c + rest * r) / m)) for c, r, m in parts)

    points = [(c, r) for c in GRID for r in GRID]
    conv, rest = _centre(points, [loss(c, r) for c, r in points])
    return Factors(rest, conv)


def _centre(points: list[tuple[float, ...]], losses: list[float]) -> tuple[float, ...]:
    """The geometric centre of the points within 0.001 of the least loss (the criterion is
    nearly flat, host time aside, between the two middle rows of an even count: take the
    middle, not an end)."""
    least = min(losses) + 1e-3
    best = [p for p, v in zip(points, losses, strict=True) if v <= least]
    return tuple(
        math.exp(sum(math.log(p[i]) for p in best) / len(best)) for i in range(len(best[0]))
    )


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
    return {
        name: list(f["devices"]) for name, f in raw["families"].items() if name not in GENERATIONS
    }


def group_of(row: CorpusRow) -> str:
    """The fitted group of a row: its generation's where one is fitted, else its family."""
    for name, (family, devices) in GENERATIONS.items():
        if row.family == family and row.device_key in devices:
            return name
    return row.family


def _fit_all(outcomes: list[Outcome], cache: dict, members: dict) -> dict[str, Any]:
    families: dict[str, Any] = {}
    # NB: a family's matmul efficiencies (geforce_gemm.py) are part of the model refitted here
    raw = json.loads(FAMILIES_JSON.read_text())["families"]
    kept = {
        n: {"matmul_efficiency": f["matmul_efficiency"]}
        for n, f in raw.items()
        if f.get("matmul_efficiency")
    }
    groups = sorted({o.row.family for o in outcomes} | set(members))
    groups += [g for g in GENERATIONS if g not in groups]
    for group in groups:
        generation = GENERATIONS.get(group)
        calib = [
            o
            for o in outcomes
            if o.row.split == "calibration"
            and (group_of(o.row) == group if generation else o.row.family == group)
        ]
        usable = [o for o in calib if o.status == "ok"]
        factors = fit_group(usable, cache, group in CLASS_FIT_FAMILIES) if usable else None
        families[group] = {
            **({"within": generation[0]} if generation else {}),
            "devices": list(generation[1]) if generation else members.get(group, []),
            "device_time_factor": None if factors is None else round(factors.rest, 4),
            "op_class_factors": {} if factors is None else factors.classes(),
            "fitted_on": [o.row.id for o in usable],
            "left_out": {o.row.id: o.status for o in calib if o.status != "ok"},
            **kept.get(group, {}),
        }
    return families


def _prediction(o: Outcome, cache: dict, families: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": o.row.id, "family": o.row.family, "status": o.status}
    if o.unfitted is None:
        return entry
    group = group_of(o.row)
    fam = families.get(group) or {}
    if fam.get("device_time_factor") is None:
        group, fam = o.row.family, families.get(o.row.family) or {}
    factor = fam.get("device_time_factor")
    scored = o.status in ("ok", PRERELEASE) and factor is not None
    if scored:
        classes = fam["op_class_factors"]
        item = compare.traced(o.row, cache)
        fitted = compare.step_seconds(o.row, item, factor, classes or None)
    else:
        fitted, classes = o.unfitted, {}
    entry.update(
        {
            "device": o.row.device_key,
            "group": group if scored else None,
            "metric": o.row.metric,
            "unit": o.row.unit,
            "factor": factor if scored else 1.0,
            "op_class_factors": classes,
            "predicted_step_seconds": round(fitted, 6),
            "predicted_value": round(compare.predicted_value(o.row, fitted), 4),
            "unfitted_step_seconds": round(o.unfitted, 6),
            "unfitted_value": round(compare.predicted_value(o.row, o.unfitted), 4),
            "notes": list(o.notes),
        }
    )
    return entry


def fit_and_predict(rows: list[CorpusRow]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(families.json, heldout_predictions_v2.json) as documents."""
    cache = compare._load_cache()
    outcomes = [evaluate(r, cache) for r in rows]
    families = _fit_all(outcomes, cache, _family_devices())
    today = date.today().isoformat()
    fams = {
        "date": today,
        "source": "benchmarks/external/corpus.yaml calibration rows (split_rule), fitted by "
        "benchmarks/external/fit.py (model version 2)",
        "method": "NVIDIA families: a factor on every device kernel's modelled time (H100 "
        "efficiencies, catalog rates) and a further factor on convolutions "
        "(op_class_factors.conv, relative); Apple silicon: one factor per GPU generation with "
        "calibration rows (apple-silicon-m1, apple-silicon-m3; later entries override earlier "
        "ones for their devices), the family's for the others; each minimises the sum of "
        "|log(predicted/measured step time)| over the usable calibration rows; Hopper devices "
        "keep the H100 calibration; rows on pre-release MPS builds are not fitted on",
        "versions": _versions(),
        "families": families,
    }
    predictions = [_prediction(o, cache, families) for o in outcomes if o.row.split == "heldout"]
    doc = {
        "date": today,
        "version": 2,
        "versions": _versions(),
        "families_json": "src/trainfit/timing/families.json",
        "note": "Predictions of the held-out rows by model version 2, committed before their "
        "errors were computed. Version 1's are in heldout_predictions.json.",
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
            print(
                name,
                fam["device_time_factor"],
                fam["op_class_factors"],
                len(fam["fitted_on"]),
                "rows",
            )
        return 0
    if command == "report":
        from benchmarks.external import score

        REPORT.write_text(score.render(rows))
        return 0
    if command == "record":
        from benchmarks.external import score

        _dump(FAMILIES_JSON, score.record_checks(rows, PREDICTIONS_COMMIT))
        return 0
    raise SystemExit(f"unknown command {command!r}: trace, fit, predict, report or record")
