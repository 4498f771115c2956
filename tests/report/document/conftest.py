"""The report tests' plan of the wide MLP on three GPUs (one of them the 1 GiB test GPU,
whose catalog every test here sees) and its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.document.wide import CLAIMS, INPUT, MODEL, TINY
from trainfit import TrainSpec
from trainfit.plan.options import Plan
from trainfit.plan.search import plan
from trainfit.report.document import Report, build_report
from trainfit.timing.run import RunSpec


@pytest.fixture(scope="module")
def catalog_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("catalog") / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


@pytest.fixture(autouse=True)
def tiny_catalog(catalog_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINFIT_CATALOG", str(catalog_file))


@pytest.fixture(scope="module")
def planned(catalog_file: Path) -> Plan:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAINFIT_CATALOG", str(catalog_file))
        return plan(
            TrainSpec(model=MODEL, inputs=(INPUT,)),
            32,
            ("rtx-4060", "h100", "tiny-gpu"),
            run=RunSpec(samples=20_000, epochs=2, kwh_price=0.30),
        )


@pytest.fixture(scope="module")
def report(planned: Plan, catalog_file: Path) -> Report:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAINFIT_CATALOG", str(catalog_file))
        return build_report(
            [planned],
            title="Wide MLP <on> three GPUs",
            description="What fits where & why.",
            claims=CLAIMS,
            names=["wide"],
        )
