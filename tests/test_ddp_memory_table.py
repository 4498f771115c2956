"""The DDP memory study (benchmarks/sharded/ddp_memory.py, ddp_compare.py): its table is what
ddp_compare makes of the committed raw results, its predictions are the ones committed before
the earlier runs, and the untied-weight arithmetic of its reading holds on the raw figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "benchmarks" / "sharded" / "results"
RAW = RESULTS / "ddp_memory_raw_h100"


def test_the_ddp_memory_table_is_regenerated_from_its_raw_results(tmp_path: Path) -> None:
    out = tmp_path / "ddp_memory_h100.md"
    subprocess.run(
        [sys.executable, "-m", "benchmarks.sharded.ddp_compare", "--out", str(out)],
        cwd=ROOT,
        check=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"},
    )
    assert out.read_bytes() == (RESULTS / "ddp_memory_h100.md").read_bytes()


def test_the_predictions_are_the_committed_blind_ones() -> None:
    cases = json.loads((RESULTS / "ddp_memory_predicted.json").read_text())["cases"]
    committed: dict = {}
    for folder in ("multigpu_configs", "multigpu_heldout_configs"):
        committed.update(json.loads((RESULTS / folder / "predicted.json").read_text())["cases"])
    compared = 0
    for name, guess in cases.items():
        if name in committed:
            assert guess["per_rank_bytes"] == committed[name]["per_rank_bytes"], name
            compared += 1
    four = RESULTS / "scale_configs" / "llama-3.2-1b-s1024-e8-ddp-g4" / "fsdp2_h100.json"
    config = json.loads(four.read_text())
    guess = cases["llama-3.2-1b-s1024-b2-ddp"]
    assert guess["per_rank_bytes"] == config["predicted_per_rank_bytes"]
    assert guess["peak_allocated_bytes"] == config["predicted_peak_allocated_bytes"]
    assert compared == 6


def test_the_untied_head_accounts_for_the_missing_memory() -> None:
    untied = json.loads((RAW / "llama-3.2-1b-s1024-b2-ddp-meta.json").read_text())["ranks"][0]
    tied = json.loads((RAW / "llama-3.2-1b-s1024-b2-ddp-meta-retied.json").read_text())["ranks"][0]
    extra = untied["parameters_wrapped"]["elements"] - tied["parameters_wrapped"]["elements"]
    assert extra == 128256 * 2048  # NB: Llama-3.2-1B's vocabulary x hidden: one more head
    # NB: fp32 weight, gradient, DDP bucket, two AdamW moments and the foreach temporary
    gap = max(untied["step_peaks"]) - max(tied["step_peaks"])
    assert abs(gap - 24 * extra) < 0.02e9


def test_peak_live_keeps_what_was_allocated_at_the_maximum() -> None:
    from benchmarks.sharded.ddp_memory import peak_live

    frame = {"filename": "/a/b/c.py", "line": 3, "name": "f"}
    trace = [
        {"action": "alloc", "addr": 1, "size": 10, "user_metadata": "x", "frames": [frame]},
        {"action": "alloc", "addr": 2, "size": 20, "user_metadata": "y", "frames": []},
        {"action": "free_requested", "addr": 1, "size": 10},
        {"action": "free_completed", "addr": 1, "size": 10},
        {"action": "alloc", "addr": 3, "size": 5, "user_metadata": "z", "frames": []},
    ]
    found = peak_live(trace, 0)
    assert found["replayed_peak_bytes"] == 30
    assert found["peak_event_index"] == 1
    assert found["live_by_label"] == {"y": 20, "x": 10}
    assert found["live_groups"][1]["frames"] == ["b/c.py:3:f"]
