"""A plan counted long waits for a yes; the seeds' and everyday plans do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainfit.cli.main import main
from trainfit.errors import SpecError
from trainfit.specfile.duration import SECONDS_PER_DEVICE, Workload, check_confirmed, workload
from trainfit.specfile.options import PlanOptions


def test_a_workload_counts_each_device_of_each_model_and_stage() -> None:
    models = [
        PlanOptions(model="gpt2"),  # NB: the default devices
        PlanOptions(model="gpt2", device=("h100", "t4")),
        PlanOptions(model="gpt2", device=("h100", "t4"), stage=("5:backbone.*", "50")),
    ]
    work = workload(models)
    assert work == Workload(models=3, device_plans=3 + 2 + 4)
    assert work.seconds == 9 * SECONDS_PER_DEVICE


def test_a_long_plan_needs_a_yes() -> None:
    check_confirmed(Workload(models=1, device_plans=10), confirmed=False)  # NB: 50 s: starts
    long = Workload(models=10_000, device_plans=30_000)
    with pytest.raises(SpecError, match=r"10000 models and 30000 device plans, about 42 hours"):
        check_confirmed(long, confirmed=False)
    check_confirmed(long, confirmed=True)


def test_the_cli_refuses_a_long_spec_file_before_planning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = "\n".join(f"  - {{name: m{i}, model: gpt2}}" for i in range(40))
    spec = tmp_path / "many.yaml"
    spec.write_text(f"training: {{effective_batch: 8}}\nmodels:\n{models}\n")
    assert main(["plan", str(spec)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trainfit: error: this plan covers 40 models and 120 device plans")
    assert "pass --yes to start it" in err
