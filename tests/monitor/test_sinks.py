"""`trainfit.monitor.sinks`: the console line, the CSV file and TensorBoard (CPU)."""

from __future__ import annotations

import csv
import io
import sys

import pytest

from tests.monitor.support import GiB, Net, quiet, train
from trainfit.errors import TrainfitError
from trainfit.monitor import Monitor, Sample
from trainfit.monitor.notes import CsvColumnsDropped
from trainfit.monitor.sinks import CSV_COLUMNS, console_line


def test_console_line_exact() -> None:
    sample = Sample(
        step=7,
        time=0.0,
        step_seconds=0.25,
        allocated_bytes=GiB,
        reserved_bytes=2 * GiB,
        peak_allocated_bytes=3 * GiB,
        device_used_bytes=None,
        utilization_percent=87.4,
        power_watts=312.2,
        temperature_c=61.0,
        loss=2.5,
        scalars={"lr": 0.001},
    )
    assert console_line(sample) == (
        "trainfit: step 7 | loss 2.5000 | 0.250 s/step | alloc 1.00 GiB | reserved 2.00 GiB | "
        "peak 3.00 GiB | util 87% | 312 W | 61 C | lr 0.001"
    )


def test_console_writes_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    with quiet() as mon:
        train(Net(), mon, steps=1)
    assert capsys.readouterr().err == ""
    with quiet(console=True) as mon:
        train(Net(), mon, steps=2)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" | ")[0] for line in lines] == ["trainfit: step 1", "trainfit: step 2"]
    assert "alloc 1.00 GiB | reserved 2.00 GiB | peak 1.50 GiB | device 3.00 GiB" in lines[0]
    stream = io.StringIO()
    with quiet(console=stream) as mon:
        train(Net(), mon, steps=1)
    assert stream.getvalue().startswith("trainfit: step 1 | loss ")


def test_real_cpu_loop_writes_csv_and_tensorboard(tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    path, logs = tmp_path / "run.csv", tmp_path / "tb"
    with Monitor(
        model=Net(), csv=str(path), tensorboard=str(logs), console=False, interval_s=0.05
    ) as mon:
        losses = train(mon.model, mon, steps=4)  # type: ignore[arg-type]
    rows = list(csv.reader(path.open()))
    assert tuple(rows[0]) == (*CSV_COLUMNS, "lr")
    assert len(rows) == 5
    table = [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]
    assert [int(r["step"]) for r in table] == [1, 2, 3, 4]
    assert [float(r["loss"]) for r in table] == pytest.approx(losses)
    assert all(int(r["allocated_bytes"]) > 0 for r in table)  # NB: the CPU's resident set
    assert {r["reserved_bytes"] for r in table} == {""}  # NB: the CPU has no reserved figure
    assert all(float(r["lr"]) == 0.1 for r in table)
    events = EventAccumulator(str(logs))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "memory/allocated_GiB", "train/step_seconds"} <= tags
    assert "gpu/power_W" not in tags  # NB: no NVML on the CPU
    loss = events.Scalars("train/loss")
    assert [e.step for e in loss] == [1, 2, 3, 4]
    assert [e.value for e in loss] == pytest.approx(losses, rel=1e-6)


def test_missing_tensorboard_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with (
        pytest.raises(TrainfitError, match=r"pip install tensorboard"),
        quiet(tensorboard=str(tmp_path)),
    ):
        pass


def test_a_scalar_after_the_first_csv_record_is_a_note(tmp_path) -> None:
    stream = io.StringIO()
    with quiet(csv=str(tmp_path / "run.csv"), console=stream) as mon:
        mon.step(loss=1.0)
        mon.step(loss=1.0, lr=0.1, beta=0.9)
        mon.step(loss=1.0, lr=0.1)
    assert mon.notes == [CsvColumnsDropped(columns=("beta", "lr"))]
    assert stream.getvalue().splitlines()[2] == (
        "trainfit: note: CSV columns are fixed at the first record: beta, lr not written there"
    )
