"""`trainfit.report.document.write`: the report's files written whole, the same bytes for the
same inputs; and written by `trainfit plan --report` and by the docs' example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.document.wide import CLAIMS, INPUT, MODEL
from trainfit.cli.main import main
from trainfit.report.document import build_report, render_plots, write_report


@pytest.mark.slow
def test_the_same_inputs_give_the_same_bytes(report, planned, tmp_path) -> None:
    again = build_report(
        [planned],
        title=report.title,
        description=report.description,
        claims=CLAIMS,
        names=["wide"],
    )
    write_report(report, tmp_path / "a")
    write_report(again, tmp_path / "b")
    files = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    assert len(files) == 8  # report.md, .json, .html, 3 plots, the 2 configs of the GPUs that fit
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert render_plots(report) == render_plots(again)
    assert str(tmp_path) not in (tmp_path / "a" / "report.json").read_text()


@pytest.mark.slow
def test_the_docs_example_runs(tmp_path, monkeypatch) -> None:
    text = (Path(__file__).parents[3] / "docs" / "report.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/report.md", "exec"), {})
    assert (tmp_path / "report" / "report.html").is_file()
    assert (tmp_path / "report" / "plots" / "emotion_mlp_memory.png").is_file()


@pytest.mark.slow
def test_plan_command_writes_the_report(tmp_path, capsys) -> None:
    out = tmp_path / "rep"
    argv = ["plan", MODEL, "--input", INPUT, "--effective-batch", "32", "--device", "rtx-4060"]
    argv += ["--device", "tiny-gpu", "--samples", "1000", "--jobs", "1", "--report", str(out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"wrote {out / 'report.html'}" in err
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == [
        "configs/wide_mlp/config_rtx-4060.yaml",
        "plots/wide_mlp_curve.png",
        "plots/wide_mlp_memory.png",
        "plots/wide_mlp_time.png",
        "report.html",
        "report.json",
        "report.md",
    ]
    assert "# trainfit plan: wide_mlp" in (out / "report.md").read_text()


@pytest.mark.slow
def test_plan_command_with_stages_writes_each_stage(tmp_path, capsys) -> None:
    out = tmp_path / "rep"
    argv = ["plan", MODEL, "--input", INPUT, "--effective-batch", "32", "--device", "rtx-4060"]
    argv += ["--samples", "1000", "--stage", "1:0.*", "--stage", "2", "--jobs", "1"]
    assert main([*argv, "--report", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "## Schedule over the stages" in md and md.count("### Quick comparison") == 2
    assert (out / "configs/wide_mlp/stage1/config_rtx-4060.yaml").is_file()
    assert (out / "plots/wide_mlp_stage2_memory.png").is_file()


def test_an_unwritable_report_directory_fails_before_planning(tmp_path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["plan", MODEL, "--input", INPUT, "--effective-batch", "32", "--device", "h100"]
    assert main([*argv, "--report", str(blocker / "rep")]) == 1
    assert "report directory" in capsys.readouterr().err


@pytest.mark.slow
def test_plan_with_inference_and_an_effective_batch_reports_both(tmp_path, capsys) -> None:
    out = tmp_path / "rep"
    argv = ["plan", "trainfit.models.zoo:emotion_mlp", "--effective-batch", "32", "--device",
            "rtx-4060", "--samples", "1000", "--jobs", "1", "--inference",
            "--inference-precision", "fp32", "--infer-batch", "1",
            "--report", str(out)]  # fmt: skip
    assert main(argv) == 0
    md = (out / "report.md").read_text()
    assert "## Quick comparison" in md and "## Inference" in md
    assert "| rtx-4060 | forward | fp32 | 1 |" in md
    data = json.loads((out / "report.json").read_text())
    assert data["models"][0]["inference"][0]["kind"] == "forward"


def test_serving_only_plan_writes_an_inference_report(tmp_path, capsys) -> None:
    out = tmp_path / "rep"
    argv = ["plan", "trainfit.models.zoo:emotion_mlp", "--device", "rtx-4060", "--inference",
            "--inference-precision", "fp16", "--report", str(out)]  # fmt: skip
    assert main(argv) == 0
    md = (out / "report.md").read_text()
    assert "| rtx-4060 | forward | fp16 | 1 |" in md and "Quick comparison" not in md
