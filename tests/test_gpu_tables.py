"""The committed GPU tables are what their compare scripts make of the committed raw results, byte
for byte: LoRA (benchmarks/lora), generation and DPO (benchmarks/inference), and DDP/FSDP2 per
rank on two GPUs (benchmarks/sharded/multigpu). The LoRA and multi-GPU tables read their
predictions from the committed JSON (the estimates in the LoRA runs' records, the multi-GPU
configs' predicted.json, checked here against a fresh plan for one case); the inference one
re-estimates every row (about 15 s on one core)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).parents[1]
BENCH = ROOT / "benchmarks"


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"},
    )
    return done.stdout


def test_the_lora_table_is_regenerated_from_its_raw_results() -> None:
    results = BENCH / "lora" / "results"
    out = _run("benchmarks.lora.compare", str(results / "raw_h100"))
    assert out == (results / "lora_h100.md").read_text()


@pytest.mark.slow
def test_the_inference_and_preference_tables_are_regenerated(tmp_path: Path) -> None:
    results = BENCH / "inference" / "results"
    _run(
        "benchmarks.inference.compare",
        "--measured",
        str(results / "raw_h100"),
        "--results",
        str(tmp_path),
    )
    for name in ("inference_h100.md", "preference_h100.md"):
        assert (tmp_path / name).read_bytes() == (results / name).read_bytes(), (
            f"{name}: rerun `python -m benchmarks.inference.compare --measured "
            "benchmarks/inference/results/raw_h100` if intended"
        )


def test_the_multigpu_table_is_regenerated_from_its_raw_results(tmp_path: Path) -> None:
    results = BENCH / "sharded" / "results"
    out = tmp_path / "multigpu_h100.md"
    _run(
        "benchmarks.sharded.multigpu",
        "compare",
        str(results / "multigpu_raw_h100" / "multigpu_measured.json"),
        "--card",
        "h100",
        "--out",
        str(out),
    )
    committed = results / "multigpu_h100.md"
    assert out.read_bytes() == committed.read_bytes()
    # the table says the model was revised after the run, and keeps the blind predictions
    text = committed.read_text()
    assert "The model was revised after this run" in text
    assert "| gpt2-medium-s1024-b4-fsdp2 | fsdp2 |" in text and "+15.7%" in text


@pytest.mark.slow
def test_the_multigpu_predictions_are_what_the_code_plans_now() -> None:
    from benchmarks.sharded.multigpu import CASES, CONFIGS, plan_case

    from trainfit.plan.words import rank_memory_dict

    recorded = json.loads((CONFIGS / "predicted.json").read_text())
    if recorded["environment"]["torch"] != torch.__version__:
        pytest.skip(f"recorded with torch {recorded['environment']['torch']}")
    name = "qwen2-0.5b-s1024-b2-ddp"  # NB: the cheapest case to plan (two micro-batches)
    spec, found = plan_case(CASES[name])
    assert found is not None and found.micro_batch == spec.batch
    assert rank_memory_dict(found.memory) == recorded["cases"][name], (
        f"{name}: rerun `python -m benchmarks.sharded.multigpu configs` and `compare` if intended"
    )
    config = json.loads((CONFIGS / f"fsdp2_{name}.json").read_text())
    assert config["predicted_per_rank_bytes"] == found.memory.total_bytes


def test_the_held_out_multigpu_table_is_regenerated_from_its_raw_results(tmp_path: Path) -> None:
    results = BENCH / "sharded" / "results"
    out = tmp_path / "multigpu_heldout_h100.md"
    _run(
        "benchmarks.sharded.multigpu",
        "compare",
        str(results / "multigpu_heldout_raw_h100" / "multigpu_measured.json"),
        "--predicted",
        str(results / "multigpu_heldout_configs" / "predicted.json"),
        "--out",
        str(out),
    )
    committed = results / "multigpu_heldout_h100.md"
    assert out.read_bytes() == committed.read_bytes()
    text = committed.read_text()
    assert "Held out: these cases were not used to revise the model" in text
    assert "| all | 6 |" in text
