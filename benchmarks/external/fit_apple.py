"""Model version 3 for Apple silicon: the held-out rows added after version 2, predicted by
version 2 before anything changed, then per-generation factors for convolutions and for every
other kernel fitted on the Apple calibration rows, and the held-out Apple rows predicted by
it. Run through `python -m benchmarks.external.compare apple-old|apple-fit|apple-report`.

What changed against version 2 (fit.py):

- The step-time model times a normalisation on an Apple GPU as any bandwidth-bound kernel
  (trainfit.timing.step): the H100's channel curve is cuDNN's, and it made the CIFAR ResNets'
  16-64-channel BatchNorms 2x too slow on an M1 Pro. That change was made after reading the
  version-2 errors of those held-out rows: they are scored again but are not blind.
- Two factors per Apple GPU generation, as for the NVIDIA families: one on convolutions (MPS
  convolutions through MPSGraph) and one on every other kernel (matrix multiplies, attention,
  memory-bound kernels). A generation fits both where a calibration row is mostly non-
  convolution time (the M3 Pro's BERT); else its convolution factor with the family's factor
  for the rest (the M1 rows are all convolution networks). M2 and M4 devices take the family's
  two factors, fitted on every usable Apple calibration row (no calibration row exists on
  either: M2 is a revision of the M1's GPU, M4 of the M3's, but neither is assumed equal).
- The 24-core M1 Max and the 14-core M3 Pro have catalog rows now (derived rates), so two
  calibration rows of version 2's corpus are fitted on (rasbt-issue32-m1max-24c,
  lucadiliello-m3pro-b64-s128).

The NVIDIA families' factors are version 2's, copied unchanged.
"""

from __future__ import annotations

import json
import math
from datetime import date
from typing import Any

from benchmarks.external import compare, fit
from benchmarks.external.fit import Factors, Outcome
from benchmarks.external.load import CorpusRow

FAMILY = "apple-silicon"
PREDICTIONS = compare.RESULTS / "heldout_predictions_v3.json"
REPORT = compare.RESULTS / "time_by_family_v3.md"
REST_SHARE = 0.5
"""A generation fits its own rest factor when a calibration row has at least this share of its
modelled step outside convolutions."""


def _apple(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.row.family == FAMILY]


ADDED_GROUPS = frozenset(
    {
        "lucadiliello/pytorch-apple-silicon-benchmarks#issue4",
        "rasbt/machine-learning-notes#pr34",
        "rasbt/machine-learning-notes#pr35",
        "ml-explore/mlx#issue2770",
    }
)
"""The Apple source groups added after version 2 (corpus.yaml's split_rule_additions)."""


def new_heldout(rows: list[CorpusRow]) -> list[CorpusRow]:
    """The held-out Apple rows added after version 2."""
    return [
        r
        for r in rows
        if r.family == FAMILY and r.split == "heldout" and r.source_group in ADDED_GROUPS
    ]


def _entry(o: Outcome, cache: dict, families: dict[str, Any]) -> dict[str, Any]:
    # NB: fit._prediction labels an entry with the group whose factors it used
    return fit._prediction(o, cache, families)


def old_model(rows: list[CorpusRow]) -> dict[str, Any]:
    """Version 2's predictions (its factors, the step-time code of this commit) of the held-out
    Apple rows added after it: the document that version 3's predictions are added to."""
    cache = compare._load_cache()
    families = json.loads(fit.FAMILIES_JSON.read_text())["families"]
    wanted = {r.id for r in new_heldout(rows)}
    entries = [
        _entry(fit.evaluate(r, cache), cache, families)
        for r in compare.time_rows(rows)
        if r.id in wanted
    ]
    unscored = sorted(wanted - {e["id"] for e in entries})
    return {
        "date": date.today().isoformat(),
        "note": "Held-out Apple rows added after model version 2 (split_rule_additions): "
        "version 2's predictions, committed before version 3 was fitted and before any error "
        "was computed; 'version_3' is added by the commit that fits it.",
        "version_2": {"factors": "families.json of commit f2fe6b2", "rows": entries},
        "not_scored": {r: "not reproducible (corpus.yaml gives the reason)" for r in unscored},
    }


def _rest_share(o: Outcome, cache: dict) -> float:
    conv, rest, _ = fit._split(o, cache)
    return rest / (conv + rest)


def _conv_only(outcomes: list[Outcome], cache: dict, rest: float) -> Factors:
    parts = [fit._split(o, cache) for o in outcomes]

    def loss(conv: float) -> float:
        return sum(abs(math.log((conv * c + rest * r) / m)) for c, r, m in parts)

    losses = [loss(c) for c in fit.GRID]
    return Factors(rest, fit._centre([(c,) for c in fit.GRID], losses)[0])


def fit_apple(outcomes: list[Outcome], cache: dict) -> dict[str, Factors]:
    """group -> factors: the family's on every usable Apple calibration row, each generation's
    on its own rows (its rest factor the family's where no row is mostly non-convolution)."""
    usable = [o for o in _apple(outcomes) if o.row.split == "calibration" and o.status == "ok"]
    out = {FAMILY: fit.fit_group(usable, cache, with_conv=True)}
    for group in fit.GENERATIONS:
        mine = [o for o in usable if fit.group_of(o.row) == group]
        if not mine:
            continue
        if any(_rest_share(o, cache) >= REST_SHARE for o in mine):
            out[group] = fit.fit_group(mine, cache, with_conv=True)
        else:
            out[group] = _conv_only(mine, cache, out[FAMILY].rest)
    return out


def _families_doc(outcomes: list[Outcome], cache: dict) -> dict[str, Any]:
    doc = json.loads(fit.FAMILIES_JSON.read_text())
    fitted = fit_apple(outcomes, cache)
    calib = [o for o in _apple(outcomes) if o.row.split == "calibration"]
    for group, factors in fitted.items():
        entry = doc["families"][group]
        mine = [o for o in calib if group == FAMILY or fit.group_of(o.row) == group]
        entry["device_time_factor"] = round(factors.rest, 4)
        entry["op_class_factors"] = factors.classes()
        entry["fitted_on"] = [o.row.id for o in mine if o.status == "ok"]
        entry["left_out"] = {o.row.id: o.status for o in mine if o.status != "ok"}
        entry.pop("heldout_check", None)
    doc["date"] = date.today().isoformat()
    doc["source"] = (
        "benchmarks/external/corpus.yaml calibration rows (split_rule, split_rule_additions), "
        "fitted by benchmarks/external/fit.py (NVIDIA families: model version 2) and "
        "fit_apple.py (Apple silicon: model version 3)"
    )
    doc["method"] += (
        "; model version 3 for Apple silicon (fit_apple.py): a convolution factor and a factor on "
        "every other kernel per GPU generation, the family's pair for M2 and M4, normalisations "
        "timed as bandwidth-bound kernels on Apple GPUs"
    )
    return doc


def fit_and_predict(rows: list[CorpusRow]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(families.json with version 3's Apple factors, the predictions document with
    version 3's predictions of every held-out Apple row added)."""
    cache = compare._load_cache()
    outcomes = [fit.evaluate(r, cache) for r in compare.time_rows(rows)]
    fams = _families_doc(outcomes, cache)
    doc = json.loads(PREDICTIONS.read_text())
    doc["version_3"] = {
        "date": date.today().isoformat(),
        "families_json": "src/trainfit/timing/families.json",
        "rows": [
            _entry(o, cache, fams["families"]) for o in _apple(outcomes) if o.row.split == "heldout"
        ],
    }
    return fams, doc


def _dump(path: compare.Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=1) + "\n")


def main(command: str, rows: list[CorpusRow]) -> int:
    if command == "apple-old":
        _dump(PREDICTIONS, old_model(rows))
        return 0
    if command == "apple-fit":
        fams, doc = fit_and_predict(rows)
        _dump(fit.FAMILIES_JSON, fams)
        _dump(PREDICTIONS, doc)
        for group in (FAMILY, *fit.GENERATIONS):
            entry = fams["families"][group]
            print(group, entry["device_time_factor"], entry["op_class_factors"])
        return 0
    if command == "apple-report":
        from benchmarks.external import score_apple

        REPORT.write_text(score_apple.render(rows))
        return 0
    if command == "apple-record":
        from benchmarks.external import score_apple

        _dump(fit.FAMILIES_JSON, score_apple.record_checks(rows))
        return 0
    raise SystemExit(
        f"unknown command {command!r}: apple-old, apple-fit, apple-report or apple-record"
    )
