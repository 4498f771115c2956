"""`trainfit.export.write`: the exports written to files, what cannot be exported skipped; and
written by `trainfit plan --export`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.export.support import EIGHT_BIT, MLP, NO, SHARDED, _accelerate_launch, _hand_plan, _of
from trainfit.cli.main import main
from trainfit.errors import TrainfitError
from trainfit.export.formats import ExportFormat
from trainfit.export.layout import Beside, DeviceNote
from trainfit.export.write import export_text, write_exports
from trainfit.plan.options import Plan


def test_write_exports_skips_what_cannot_be_exported(tmp_path: Path) -> None:
    result = _hand_plan(EIGHT_BIT, NO, SHARDED)
    exported = write_exports(result, ["hf", "yaml", "hf"], tmp_path / "out")
    assert [p.name for p in exported.written] == [
        "hf_rtx-4060.json",
        "config_rtx-4060.yaml",
        "hf_h100.json",
    ]
    assert exported.skipped == (
        "t4: does not fit; nothing to export",
        "h100: no seed-style YAML for a sharded run (one device's settings only)",
    )
    assert DeviceNote(device="rtx-4060", note=Beside.BITSANDBYTES) in exported.notes
    assert json.loads((tmp_path / "out" / "hf_h100.json").read_text())["fsdp"] is True
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        p.name for p in exported.written
    )


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    import trainfit.io

    def fail(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(trainfit.io.os, "replace", fail)
    with pytest.raises(TrainfitError, match=r"cannot write .*hf_rtx-4060\.json: disk full"):
        write_exports(_hand_plan(EIGHT_BIT), ["hf"], tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_yaml_of_a_data_parallel_run_agrees_with_the_other_files(
    small: Plan, tmp_path: Path
) -> None:
    exported = write_exports(small, ["hf", "lightning", "yaml"], tmp_path, gpus=4)
    assert tmp_path / "config_h100.yaml" in exported.written
    hf = json.loads((tmp_path / "hf_h100.json").read_text())
    lightning = json.loads((tmp_path / "lightning_h100.json").read_text())
    text = (tmp_path / "config_h100.yaml").read_text()
    micro, accum = hf["per_device_train_batch_size"], hf["gradient_accumulation_steps"]
    assert micro * accum * 4 == 64 and lightning["dataloader"]["batch_size"] == micro
    assert f"  batch_size: {micro}\n" in text
    assert f"  accumulation_steps: {accum}\n" in text
    assert "  gpus: 4\n" in text
    assert "  effective_batch_size: 64\n" in text
    assert f"--per_device_train_batch_size {micro} --gradient_accumulation_steps {accum}" in text
    assert "# data parallel over 4 GPUs: batch_size and accumulation_steps are each GPU's" in text
    # one GPU: the plan's setting, no GPU count
    one = export_text(small, _of(small, "h100"), ExportFormat.YAML)
    assert "  batch_size: 64\n" in one and "gpus:" not in one


@pytest.mark.slow
def test_cli_export_writes_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], training_arguments
) -> None:
    args = ["plan", MLP, "--effective-batch", "64", "--device", "h100", "--device", "cpu"]
    formats = [
        flag for fmt in ("hf", "lightning", "accelerate", "yaml") for flag in ("--export", fmt)
    ]
    assert main([*args, "--json", *formats, "--export-dir", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(
        f"{kind}_{device}.{ext}"
        for device in ("h100", "cpu")
        for kind, ext in (
            ("hf", "json"),
            ("lightning", "json"),
            ("accelerate", "yaml"),
            ("config", "yaml"),
        )
    )  # NB: and no temporary file left
    assert f"wrote {tmp_path / 'hf_h100.json'}" in capsys.readouterr().err
    args_h100 = training_arguments(json.loads((tmp_path / "hf_h100.json").read_text()))
    assert args_h100.bf16 and args_h100.per_device_train_batch_size == 64
    config, _ = _accelerate_launch(tmp_path / "accelerate_cpu.yaml")
    assert config.use_cpu is True


def test_cli_export_defaults_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "plan",
                MLP,
                "--effective-batch",
                "64",
                "--device",
                "cpu",
                "--json",
                "--export",
                "yaml",
            ]
        )
        == 0
    )
    assert [p.name for p in tmp_path.iterdir()] == ["config_cpu.yaml"]


def test_cli_export_dir_without_export(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", MLP, "--effective-batch", "64", "--export-dir", "x"]) == 1
    assert capsys.readouterr().err == (
        "trainfit: error: --export-dir needs --export (hf, lightning, accelerate or yaml)\n"
    )


def test_an_unwritable_export_dir_stops_the_command_before_planning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["plan", MLP, "--effective-batch", "64", "--device", "cpu", "--export", "yaml"]
    assert main([*args, "--export-dir", "/proc/x"]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("trainfit: error: cannot write to the export directory /proc/x")
    assert captured.err.count("\n") == 1
    assert captured.out == ""  # NB: refused before planning
