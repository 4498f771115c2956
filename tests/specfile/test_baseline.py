"""`trainfit.specfile.baseline`: the baseline file written, read back, and refused when bad."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainfit.errors import SpecError, TrainfitError
from trainfit.spec import OptimizerKind, Precision
from trainfit.specfile.baseline import (
    FORMAT,
    Footprint,
    current_versions,
    read_baseline,
    write_baseline,
)

FOOTPRINT = Footprint(
    needed_bytes=850_185_420,
    precision=Precision.BF16,
    checkpointing=False,
    optimizer=OptimizerKind.ADAMW,
    micro_batch=16,
    grad_accum=1,
)


def test_a_written_baseline_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    write_baseline(path, {("net", "rtx-4060"): FOOTPRINT})
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT
    assert document["models"]["net"]["rtx-4060"]["needed_bytes"] == 850_185_420
    assert document["versions"]["torch"] == current_versions()["torch"]
    baseline = read_baseline(path)
    assert baseline.footprints == {("net", "rtx-4060"): FOOTPRINT}
    assert baseline.versions == current_versions()
    assert list(tmp_path.iterdir()) == [path]  # NB: no temporary file left behind


def test_a_missing_baseline_says_how_to_write_one(tmp_path: Path) -> None:
    with pytest.raises(TrainfitError, match=r"nope.json not found; write it with .*--update"):
        read_baseline(tmp_path / "nope.json")


def test_a_baseline_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TrainfitError, match=r"no directory .*missing"):
        write_baseline(tmp_path / "missing" / "b.json", {})


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", r"is not readable JSON"),
        ('{"models": {}}', r"is not a trainfit check baseline"),
        ("[1, 2]", r"is not a trainfit check baseline"),
        (f'{{"format": "{FORMAT}", "models": []}}', r'"models" must be an object'),
        (
            f'{{"format": "{FORMAT}", "models": {{"net": {{"h100": {{"needed_bytes": "1"}}}}}}}}',
            r"models.net.h100: missing or mistyped needed_bytes, precision",
        ),
        (
            f'{{"format": "{FORMAT}", "models": {{"net": {{"h100": {{"needed_bytes": 1, '
            '"precision": "fp12", "checkpointing": false, "optimizer": "adamw", '
            '"micro_batch": 1, "grad_accum": 1}}}}',
            r"models.net.h100: unknown precision 'fp12'",
        ),
    ],
)
def test_a_bad_baseline_names_the_problem(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(TrainfitError, match=match):
        read_baseline(path)


def test_every_bad_entry_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    models = {"a": {"h100": {}}, "b": {"h100": 3}, "c": []}
    path.write_text(json.dumps({"format": FORMAT, "models": models}))
    with pytest.raises(SpecError) as raised:
        read_baseline(path)
    assert len(raised.value.problems) == 3
