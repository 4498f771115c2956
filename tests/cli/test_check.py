"""`trainfit check`: exit 0 when every model fits and grew no more than the baseline allows,
exit 1 (one line per model x device, then the verdict) when one grew or no longer fits, and
one error line with exit 1 for a bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trainfit.cli.main import main
from trainfit.hardware.catalog import get_device
from trainfit.specfile.baseline import FORMAT


def write_spec(directory: Path, factory: str) -> Path:
    path = directory / "memory.yaml"
    path.write_text(
        "models:\n"
        "  - name: net\n"
        f"    model: tests.specfile.growing:{factory}\n"
        '    inputs: ["input=B,512:float32"]\n'
        "training:\n"
        "  effective_batch: 16\n"
        "devices: [rtx-4060]\n"
        "outputs: {report: report}\n"  # NB: a check writes no report
    )
    return path


@pytest.mark.slow
def test_a_grown_model_fails_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = str(write_spec(tmp_path, "small"))
    baseline = str(tmp_path / "memory.json")
    assert main(["check", spec, "--baseline", baseline, "--update-baseline"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {baseline} (1 model x device figures)" in out
    assert json.loads(Path(baseline).read_text())["format"] == FORMAT

    assert main(["check", spec, "--baseline", baseline]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"trainfit check {spec}: 1 model x device pairs, baseline {baseline} (tolerance 2.0%)"
    )
    assert lines[1].startswith("  ok    net on rtx-4060: ")
    assert re.search(r"; \+0\.0% on the baseline's \d+\.\d\d GiB$", lines[1])
    assert lines[-1] == "passed"

    write_spec(tmp_path, "wide")  # the hidden layer 8x wider
    assert main(["check", spec, "--baseline", baseline]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  FAIL  net on rtx-4060: ")
    assert "; grew +" in lines[1] and "over the 2.0% allowed" in lines[1]
    assert lines[2] == "FAILED: 1 of 1 checks failed"
    assert lines[3] == (
        f"if the change is intended: trainfit check {spec} --baseline {baseline} "
        f"--update-baseline, and commit {baseline}"
    )
    # a tolerance just above the growth lets it pass, one just below does not (the growth's size
    # follows the modelled CUDA context); nothing but the baseline was ever written
    grew = re.search(r"; grew \+(\d+\.\d)% ", lines[1])
    assert grew is not None and float(grew[1]) > 2.0
    above, below = (float(grew[1]) + 0.2) / 100, (float(grew[1]) - 0.2) / 100
    assert main(["check", spec, "--baseline", baseline, "--tolerance", f"{below:.4f}"]) == 1
    assert main(["check", spec, "--baseline", baseline, "--tolerance", f"{above:.4f}"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.json", "memory.yaml"]


@pytest.mark.slow
def test_a_model_that_no_longer_fits_fails_without_a_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(write_spec(tmp_path, "huge"))
    assert main(["check", spec]) == 1
    lines = capsys.readouterr().out.splitlines()
    usable = 0.9 * get_device("rtx-4060").memory_bytes / 2**30  # the plan's 10% margin
    assert lines[1] == (
        "  FAIL  net on rtx-4060: does not fit one NVIDIA GeForce RTX 4060 8GB "
        f"({usable:.2f} GiB usable); see trainfit plan"
    )
    assert lines[-1] == "FAILED: 1 of 1 checks failed"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--baseline", "{tmp}/none.json"], "baseline {tmp}/none.json not found; write it with"),
        (["--tolerance", "-0.1"], "tolerance must be a fraction in [0, 1) (0.02 = 2% growth), got"),
        (["--tolerance", "1.5"], "tolerance must be a fraction in [0, 1)"),
        (["--update-baseline"], "--update-baseline needs --baseline FILE"),
    ],
)
def test_bad_inputs_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    spec = str(write_spec(tmp_path, "small"))
    argv = ["check", spec, *(e.format(tmp=tmp_path) for e in extra)]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"trainfit: error: {message.format(tmp=tmp_path)}")
    assert captured.err.count("\n") == 1 and captured.out == ""


def test_a_missing_spec_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(tmp_path / "none.yaml")]) == 1
    err = capsys.readouterr().err
    assert err == f"trainfit: error: {tmp_path}/none.yaml: spec file not found\n"


def test_a_tolerance_that_is_not_a_number_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", "memory.yaml", "--tolerance", "two"])
    assert exited.value.code == 2
    assert "argument --tolerance: invalid float value: 'two'" in capsys.readouterr().err
