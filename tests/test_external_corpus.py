"""The public-measurement corpus (benchmarks/external): its loader, and one held-out row per
device family recomputed through the library's default path (the family factor read from
src/trainfit/timing/families.json) against the committed prediction and the reported bound."""

from __future__ import annotations

import json
import math

import pytest
from benchmarks.external import compare, fit
from benchmarks.external.load import FAMILIES, load_corpus

from trainfit.hardware.catalog import get_device
from trainfit.timing.step import step_time
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target

ROWS = load_corpus()
BY_ID = {r.id: r for r in ROWS}
PREDICTED = {e["id"]: e for e in json.loads(fit.PREDICTIONS.read_text())["rows"]}
FAST_HELDOUT = {
    "consumer-ada": "xhmy-resnet50-fp32-4090-ubuntu",
    "consumer-ampere": "lambda-3090-v1-bert-large-squad-fp32",
    "datacenter": "lucadiliello-t4-b16-s128",
    "apple-silicon": "lucadiliello-m3max-b16-s512",
}


def test_loader_reads_every_row_with_its_split() -> None:
    assert len(ROWS) == 225
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


def _worst_fitted_error(family: str) -> float:
    errors = [
        abs(e["predicted_value"] / BY_ID[e["id"]].value - 1)
        for e in PREDICTED.values()
        if e["family"] == family and e["status"] == "ok"
    ]
    return max(errors)


@pytest.mark.parametrize("family", sorted(FAST_HELDOUT))
def test_heldout_row_matches_the_committed_prediction(family: str) -> None:
    row = BY_ID[FAST_HELDOUT[family]]
    committed = PREDICTED[row.id]
    device = get_device(row.device_key)
    spec = compare.build_spec(row, device.name)
    trace = trace_step(spec, target=Target.of(device))
    timed = step_time(trace.costs, spec, device, trace.tokens_per_sample, trace.trainable_tensors)
    value = compare.predicted_value(row, timed.seconds)
    # NB: the predictions were committed with the step-time model of their commit; the host
    # floor fitted later (src/trainfit/timing/host_fit.json) moves these device-bound rows by
    # well under 2% (the family factors were not refitted)
    assert math.isclose(value, committed["predicted_value"], rel_tol=0.02)
    # NB: the later host floor moved the one consumer-ada held-out row from 9.8% to 10.1%
    # error: the bound allows that point of drift
    assert abs(value / row.value - 1) <= _worst_fitted_error(family) + 0.01
    if committed["factor"] != 1.0:
        assert "fitted on" in timed.basis
