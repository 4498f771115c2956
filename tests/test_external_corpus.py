"""The public-measurement corpus (benchmarks/external): its loader, one held-out row per
device family recomputed through the library's default path (the family factors read from
src/trainfit/timing/families.json) against the committed prediction (model version 2) and
the reported bound, and (slow) every held-out row recomputed, each family's median and worst
error held just above today's so that a worse estimator fails."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict

import pytest
from benchmarks.external import compare, fit, fit_apple, v4
from benchmarks.external.load import FAMILIES, load_corpus

from trainfit.hardware.catalog import get_device
from trainfit.timing.basis import RooflineBasis
from trainfit.timing.step import step_time
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target

ROWS = load_corpus()
BY_ID = {r.id: r for r in ROWS}
PREDICTED = {e["id"]: e for e in json.loads(fit.PREDICTIONS.read_text())["rows"]}
APPLE_V3 = {e["id"]: e for e in json.loads(fit_apple.PREDICTIONS.read_text())["version_3"]["rows"]}
"""Model version 3's held-out Apple predictions (the library's default path on a Mac now)."""
V4 = {e["id"]: e for e in json.loads(v4.PREDICTIONS.read_text())["rows"]}
"""Model version 4's held-out predictions: the library's default path when they were committed
(benchmarks/external/v4.py predict), before their errors were computed."""
FAST_HELDOUT = {
    "consumer-ada": "xhmy-resnet50-fp32-4090-ubuntu",
    "consumer-ampere": "lambda-3090-v1-bert-large-squad-fp32",
    "datacenter": "lucadiliello-t4-b16-s128",
    "apple-silicon": "lucadiliello-m3max-b16-s512",
}


def test_loader_reads_every_row_with_its_split() -> None:
    assert len(ROWS) == 236
    assert len(BY_ID) == len(ROWS)
    assert {r.family for r in ROWS} <= FAMILIES
    assert {r.split for r in ROWS} == {"calibration", "heldout"}
    for row in ROWS:
        assert row.reproducible or row.reason
        assert row.value is not None or row.metric == "oom"


def test_loader_names_the_bad_row(tmp_path) -> None:
    text = compare.Path(compare.__file__).with_name("corpus.yaml").read_text()
    bad = text.replace("metric: train_throughput_samples_per_s", "metric: speed", 1)
    path = tmp_path / "corpus.yaml"
    path.write_text(bad)
    with pytest.raises(ValueError, match=r"lambda-3070-resnet50-fp32.*'metric'"):
        load_corpus(path)


TOLERANCE = {
    "apple-silicon": (0.24, 0.56),
    "consumer-ada": (0.09, 0.09),
    "consumer-ampere": (0.11, 1.33),
    "datacenter": (0.08, 0.43),
    "datacenter (Hopper)": (0.13, 0.24),
}
"""Held-out (median, worst) |predicted / measured - 1| per family, just above model version
4's errors (results/time_by_family_v4.md, computed after results/heldout_predictions_v4.json was
committed): Apple 23.3% / 55.7% (15 rows, every row over 35% on a 2022 torch nightly; released
torch 13.2% / 29.3%), consumer Ada 8.1%, consumer Ampere 10.2% / 132.2% (Lambda's RTX 3070
BERT-large at batch 1: BertAdam's per-tensor cost, results/bert_harness.md), data centre
7.9% / 43.0% (was 15.3% before the cards' own GEMM efficiencies; the worst two rows
input-bound), Hopper rows 23.5% / 38.2%, since the H100's own cuDNN rules (a convolution's
channel curve, an fp16 batch norm's share of the fp32 time; applied only on devices of no fitted
family) 12.4% / 23.5% (not blind: the rules came after these rows were seen). Every miss is
explained in benchmarks/external/README.md."""


def _committed(family: str) -> dict[str, dict]:
    return APPLE_V3 if family == "apple-silicon" else PREDICTED


def _worst_fitted_error(family: str) -> float:
    errors = [
        abs(e["predicted_value"] / BY_ID[e["id"]].value - 1)
        for e in _committed(family).values()
        if e["family"] == family and e.get("group")
    ]
    return max(errors)


@pytest.mark.parametrize("family", sorted(FAST_HELDOUT))
def test_heldout_row_matches_the_committed_prediction(family: str) -> None:
    row = BY_ID[FAST_HELDOUT[family]]
    committed = _committed(family)[row.id]
    device = get_device(row.device_key)
    spec = compare.build_spec(row, device.name)
    trace = trace_step(spec, target=Target.of(device))
    timed = step_time(trace.costs, spec, device, trace.tokens_per_sample, trace.trainable_tensors)
    value = compare.predicted_value(row, timed.seconds)
    # NB: version 4's predictions are the library's default path as committed; the older
    # versions' moved since (the host floor, a matmul's fixed cost as a time, the data-centre
    # cards' own GEMM efficiencies), by what the rechecks record
    assert math.isclose(value, V4[row.id]["predicted_value"], rel_tol=0.02)
    # NB: the later host floor moved the one consumer-ada held-out row from 8.0% to 8.2%
    # error (results/heldout_recheck_host_floor.json): the bound allows a point of drift
    assert abs(value / row.value - 1) <= _worst_fitted_error(family) + 0.01
    if committed["factor"] != 1.0:
        assert isinstance(timed.basis, RooflineBasis) and timed.basis.family is not None


def _modelled_value(row_id: str, cache: dict) -> float:
    """A held-out row's prediction through the library's default path (family factors)."""
    row = BY_ID[row_id]
    device = get_device(row.device_key)
    item = compare.traced(row, cache)
    spec = compare.build_spec(row, device.name)
    timed = step_time(item.costs, spec, device, item.tokens_per_sample, item.trainable_tensors)
    return compare.predicted_value(row, timed.seconds)


@pytest.mark.slow
def test_every_heldout_family_stays_within_todays_errors() -> None:
    cache = compare._load_cache()
    errors: dict[str, list[float]] = defaultdict(list)
    for entry in V4.values():
        if "predicted_value" not in entry:
            continue
        row = BY_ID[entry["id"]]
        errors[entry["group"]].append(abs(_modelled_value(row.id, cache) / row.value - 1))
    assert set(errors) == set(TOLERANCE)
    for family, found in errors.items():
        median, worst = TOLERANCE[family]
        assert statistics.median(found) <= median, (family, statistics.median(found))
        assert max(found) <= worst, (family, max(found))


APPLE_V3_TOLERANCE = {
    "blind": (0.43, 0.52),
    "released": (0.14, 0.30),
    "all": (0.24, 0.56),
}
"""Model version 3's held-out Apple errors (median, worst), just above results/
time_by_family_v3.md: the 3 rows added after version 2 (blind, all on a 2022 torch nightly)
42.0% / 51.6%; version 2's held-out rows on released torch (not blind) 12.5% / 29.2%; all 15
held-out Apple rows 23.2% / 55.7%. The host floor refitted after version 3 (src/trainfit/timing/
host_fit.json, the Apple factors not refitted) moved them to 42.0% / 51.6%, 13.2% / 29.3% and
23.3% / 55.7%: the released rows' median bound follows it by a point."""


@pytest.mark.slow
def test_apple_heldout_rows_stay_within_version_3s_errors() -> None:
    cache = compare._load_cache()
    added = {r.id for r in fit_apple.new_heldout(ROWS)}
    sets: dict[str, list[float]] = defaultdict(list)
    for entry in APPLE_V3.values():
        if "predicted_value" not in entry:
            continue
        row = BY_ID[entry["id"]]
        error = abs(_modelled_value(row.id, cache) / row.value - 1)
        sets["all"].append(error)
        if row.id in added:
            sets["blind"].append(error)
        elif entry["status"] == "ok":
            sets["released"].append(error)
    assert {k: len(v) for k, v in sets.items()} == {"all": 15, "blind": 3, "released": 7}
    for name, found in sets.items():
        median, worst = APPLE_V3_TOLERANCE[name]
        assert statistics.median(found) <= median, (name, statistics.median(found))
        assert max(found) <= worst, (name, max(found))


def test_the_bert_harness_excess_is_per_parameter_tensor_not_per_flop() -> None:
    """results/bert_harness.json (benchmarks/external/bert_harness.py): on one RTX 3070 run
    of Lambda's harness, BERT-large at batch 1 and BERT-base at batch 8 exceed their modelled
    steps by the same time per parameter tensor, while their FLOPs and parameters differ 2-3x;
    the steady steps are read off the logs' DLL lines, not the rows' metric."""
    from benchmarks.external import bert_harness

    runs = json.loads((compare.RESULTS / "bert_harness.json").read_text())
    large, base = runs[0], runs[1]
    assert large["row"] == "lambda-3070-bert-large-squad-fp32" and "BERT-base" in base["run"]
    assert math.isclose(large["excess_per_tensor_ms"], base["excess_per_tensor_ms"], rel_tol=0.05)
    assert large["tensors"] > 1.9 * base["tensors"]
    for run, entry in zip(bert_harness.RUNS, runs, strict=True):
        assert entry["steady_step_s"] == round(bert_harness.steady_seconds(run["dll"]), 4)
        if "metric_step_s" in entry:
            assert entry["steady_step_s"] < entry["metric_step_s"] < 1.05 * entry["steady_step_s"]
