"""The table of `trainfit measure` on a GPU, from the JSON `run_gpu.py` left in a directory.

    PYTHONPATH=src:. python -m benchmarks.measure.compare DIR [DIR ...] > results/measure_h100.md

Refuses to merge directories whose card or versions differ (one table, one card).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

GiB = 1 << 30


def _load(directory: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    env = json.loads((directory / "environment.json").read_text())
    records = {
        str(p.relative_to(directory).with_suffix("")): json.loads(p.read_text())
        for p in sorted(directory.rglob("*.json"))
        if p.name != "environment.json"
    }
    return env, records


def _succeeded(
    records: dict[str, dict[str, Any]], prefix: str, lines: list[str]
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(case, record, result) of each command under `prefix` that succeeded; a row saying
    how it failed is added to `lines` for each other one."""
    for name, record in records.items():
        if not name.startswith(prefix):
            continue
        case, result = name[len(prefix) :], record.get("result")
        if record.get("returncode") != 0 or not result:
            lines.append(f"| {case} | failed: {record.get('stderr', '')[-200:]!r} |")
            continue
        yield case, record, result


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def _row(rows: list[dict[str, Any]], quantity: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["quantity"] == quantity), None)


def steps_table(records: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "## Training steps: `trainfit measure CASE` (3 warm-up + 10 timed steps)",
        "",
        "error = estimate / measured - 1. *needed*: what the card must hold (measured: peak "
        "reserved + the process's memory outside the allocator, from NVML's process list or "
        "cudaMemGetInfo; estimated: peak reserved + runtime context). The estimate is for "
        "the catalog row the command matched to the card.",
        "",
        "| case | measured needed GiB | needed error | allocated error | reserved error "
        "| activations error | measured step ms | step-time error | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    needed: list[float] = []
    steps: list[float] = []
    for case, record, result in _succeeded(records, "steps/", lines):
        rows = result["comparison"]["rows"]
        m = result["measured"]

        def error(quantity: str, rows: list[dict[str, Any]] = rows) -> float | None:
            row = _row(rows, quantity)
            return None if row is None else row["error"]

        d, t = error("device memory needed"), error("step time (median)")
        if d is not None:
            needed.append(abs(d))
        if t is not None:
            steps.append(abs(t))
        lines.append(
            f"| {case} | {m['device_needed_bytes'] / GiB:.2f} | {_pct(d)} | "
            f"{_pct(error('peak allocated'))} | {_pct(error('peak reserved'))} | "
            f"{_pct(error('activations kept by the forward'))} | "
            f"{m['median_step_seconds'] * 1e3:.1f} | {_pct(t)} | {record['seconds']:.0f} |"
        )
    if needed:
        lines += [
            "",
            f"Device memory needed: median |error| {statistics.median(needed):.1%}, max "
            f"{max(needed):.1%} over {len(needed)} cases. Step time: median |error| "
            f"{statistics.median(steps):.1%}, max {max(steps):.1%}.",
        ]
    return lines


def max_batch_table(records: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "## Largest micro-batch: `trainfit measure CASE --max-batch` (in one process)",
        "",
        "*fresh-process answer*: `benchmarks/max_batch/results/max_batch_h100.md` (one process "
        "per tried batch, three steps each). Here: one process, attempts of three steps then an "
        "evaluation forward, the cache emptied between attempts; *left allocated growth*: "
        "memory still allocated after the last attempt's clean-up minus after the first's.",
        "",
        "| case | predicted | found | fresh-process answer | first failing | eval max | attempts "
        "| left allocated growth B | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    fresh = _fresh_process_answers()
    for case, record, r in _succeeded(records, "max_batch/", lines):
        lines.append(
            f"| {case} | {r['predicted']} | {r['max_micro_batch']} | "
            f"{fresh.get(case, '-')} | {r['first_failing']} "
            f"| {r['max_eval_batch']} | {len(r['attempts'])} | {r['leaked_bytes']} | "
            f"{record['seconds']:.0f} |"
        )
    return lines


def _fresh_process_answers() -> dict[str, str]:
    """Case -> real max of the one-process-per-batch search (its committed table)."""
    table = Path(__file__).parents[1] / "max_batch" / "results" / "max_batch_h100.md"
    answers = {}
    for line in table.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 3 and cells[2][:1].isdigit():
            answers[cells[0]] = cells[2]
    return answers


def latency_table(records: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "## Inference latency: `trainfit measure CASE --latency` (10 warm-up + 100 timed runs)",
        "",
        "| case | batch | p50 ms | p95 ms | p99 ms | samples/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for case, _, r in _succeeded(records, "latency/", lines):
        for row in r["rows"]:
            lines.append(
                f"| {case} | {row['batch']} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} | "
                f"{row['p99_ms']:.2f} | {row['samples_per_second']:.0f} |"
            )
    return lines


def faults_table(records: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "## Faults",
        "",
        "| fault | exit code | what the user saw (stderr's last line, or the result) |",
        "|---|---:|---|",
    ]
    for name, record in records.items():
        if not name.startswith("faults/"):
            continue
        said = (record.get("stderr") or "").strip().splitlines()
        shown = said[-1] if said else ""
        result = record.get("result")
        if result and "measured" in result:
            m = result["measured"]
            shown = (
                f"interrupted={m['interrupted']}, {m['steps']} timed steps kept, median "
                f"{m['median_step_seconds'] * 1e3:.1f} ms" + (f"; stderr: {shown}" if shown else "")
            )
        shown = shown.replace("|", "\\|")
        lines.append(f"| {name[7:]} | {record.get('returncode')} | {shown} |")
    return lines


def main() -> None:
    envs, records = [], {}
    for directory in sys.argv[1:]:
        env, found = _load(Path(directory))
        envs.append(env)
        records.update(found)
    keys = ("nvidia_smi", "torch", "cuda", "transformers")
    if any(tuple(e[k] for k in keys) != tuple(envs[0][k] for k in keys) for e in envs):
        raise SystemExit("the directories come from different cards or versions: not merged")
    env = envs[0]
    lines = [
        f"# `trainfit measure` on {env['nvidia_smi'].split(',')[0]}",
        "",
        f"Measured {', '.join(sorted({e['date'][:10] for e in envs}))} on {env['nvidia_smi']} "
        f"with torch {env['torch']} (CUDA {env['cuda']}), transformers {env['transformers']}, "
        f"Python {env['python']}, each command in a fresh process as a user runs it "
        "(`benchmarks/measure/run_gpu.py`). The estimates beside the measurements were made "
        "by the same command on the GPU machine's CPU.",
        "",
    ]
    for part in (steps_table, max_batch_table, latency_table, faults_table):
        body = part(records)
        if len(body) > 6:
            lines += [*body, ""]
    print("\n".join(lines).rstrip())


if __name__ == "__main__":
    main()
