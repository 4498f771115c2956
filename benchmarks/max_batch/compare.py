"""Compare the predicted maximum micro-batch with the one found on the GPU; write the table.

    PYTHONPATH=src:. python -m benchmarks.max_batch.compare [--measured results/bisect_h100.json]

Reads `results/predicted.json` (from `predict.py`) and the GPU search (`bisect_gpu.py`'s
bisect.json, committed as `results/bisect_h100.json`), and writes `results/max_batch_h100.md`.
For every case it also re-traces the step on the CPU at the real maximum and one above it, so
that the table can set the device memory trainfit predicts there beside what the GPU showed:
that says whether a miss is the memory estimate or the search.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
from pathlib import Path
from typing import Any

from benchmarks.max_batch.cases import CASES, DEVICE

RESULTS = Path(__file__).parent / "results"
GiB = 2**30


def _predicted(name: str, batches: list[int]) -> dict[int, tuple[int, int]]:
    """(peak reserved, runtime context) trainfit predicts at each batch."""
    from trainfit import TrainSpec
    from trainfit.estimator.scaling import scale_batch
    from trainfit.estimator.step import gpu_memory

    scaling = scale_batch(TrainSpec(**CASES[name], device=DEVICE))
    out: dict[int, tuple[int, int]] = {}
    for b in batches:
        spec = dataclasses.replace(scaling.spec, batch=b)
        result, context = gpu_memory(scaling.trace_at(b), spec, scaling.device)
        out[b] = (result.peak_reserved_bytes, context)
    return out


def _error(row: dict[str, Any]) -> str:
    predicted, real, low, high = row["predicted"], row.get("real"), row.get("low"), row.get("high")
    if real:
        return f"{predicted / real - 1:+.1%}"
    if low and high:
        return f"{predicted / (high - 1) - 1:+.1%}..{predicted / low - 1:+.1%}"
    return "n/a"


def _row(name: str, pred: dict[str, Any], meas: dict[str, Any] | None) -> dict[str, Any]:
    predicted = pred["predicted_max"]
    row: dict[str, Any] = {"case": name, "predicted": predicted}
    if meas is None:
        return row | {"real": None, "note": "not measured (run ended first)"}
    attempts = meas["attempts"]
    ok = {a["batch"]: a for a in attempts if a["status"] == "ok"}
    oom = {a["batch"]: a for a in attempts if a["status"] == "oom"}
    real = meas.get("real_max")
    low, high = meas.get("fits_at"), meas.get("fails_at")
    row.update(real=real, low=low, high=high, attempts=len(attempts), stopped=meas.get("stopped"))
    probe = [b for b in (low, high) if b]
    predicted_at = _predicted(name, probe) if probe else {}
    if low in ok and low in predicted_at:
        reserved, context = predicted_at[low]
        row.update(
            reserved_at_low=ok[low]["peak_reserved_bytes"],
            predicted_reserved_at_low=reserved,
            needed_at_low=reserved + context,
        )
    if high in oom and high in predicted_at:
        reserved, context = predicted_at[high]
        row.update(needed_at_high=reserved + context, oom_message=oom[high].get("message", ""))
    return row


def _cell_memory(row: dict[str, Any]) -> str:
    measured, predicted = row.get("reserved_at_low"), row.get("predicted_reserved_at_low")
    if measured is None or predicted is None:
        return "n/a"
    return f"{measured / GiB:.2f} / {predicted / GiB:.2f} ({predicted / measured - 1:+.1%})"


def _cell_needed(row: dict[str, Any], budget: int) -> str:
    needed = row.get("needed_at_low")
    if needed is None:
        return "n/a"
    return f"{needed / GiB:.2f}" + (" (over)" if needed > budget else "")


def render(rows: list[dict[str, Any]], predicted: dict[str, Any], measured: dict[str, Any]) -> str:
    env, penv = measured["environment"], predicted["environment"]
    devices = sorted(
        {a.get("device", "") for c in measured["cases"].values() for a in c["attempts"]} - {""}
    )
    totals = sorted(
        {
            a["total_memory_bytes"]
            for c in measured["cases"].values()
            for a in c["attempts"]
            if "total_memory_bytes" in a
        }
    )
    cudnn = sorted(
        {str(a["cudnn"]) for c in measured["cases"].values() for a in c["attempts"] if "cudnn" in a}
    )
    budget = next(iter(predicted["cases"].values()))["budget_bytes"]
    runs = [env, *(r["environment"] for r in measured.get("later_runs", []))]
    dates = sorted({r["date"][:10] for r in runs})
    if len({(r["torch"], r["transformers"], r.get("nvidia_smi")) for r in runs}) != 1:
        raise ValueError("the runs merged into this table differ in card, driver or versions")
    lines = [
        "# Maximum micro-batch on an NVIDIA H100: predicted vs. found",
        "",
        f"Measured {', '.join(dates)} on {', '.join(devices) or 'unknown'} "
        f"(nvidia-smi: {env.get('nvidia_smi', '?')}; torch total memory "
        f"{', '.join(str(t) for t in totals)} B), torch {env['torch']} (CUDA {env['cuda']}, "
        f"cuDNN {', '.join(cudnn)}), transformers {env['transformers']}, Python "
        f"{env['python']}: one fresh process per tried batch, three training steps each "
        "(`benchmarks/max_batch/bisect_gpu.py`).",
        "",
        f"Predicted {penv['date'][:10]} on {penv['machine']}, CPU only, torch {penv['torch']}, "
        f"transformers {penv['transformers']}: `max_micro_batch(spec, margin=0)` for the "
        f"catalog's `{penv['device']}` (budget {budget} B = {budget / GiB:.2f} GiB) "
        "(`benchmarks/max_batch/predict.py`).",
        "",
        "*real max*: the largest micro-batch whose three steps completed, with the next one "
        "out of memory (a range where the search was cut short). error = predicted / real - 1. "
        "*reserved at real max*: PyTorch's peak reserved memory over the three steps at the "
        "real maximum, measured / predicted (GiB). *needed at real max*: what trainfit "
        "predicts the card must hold there (peak reserved + runtime context), GiB; *over* "
        "where that exceeds the budget, which is why the prediction stopped below it.",
        "",
        "| case | predicted max | real max | error | attempts | reserved at real max: "
        "measured / predicted GiB | needed at real max GiB |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        real = row.get("real")
        if real is not None:
            real_cell = str(real)
        elif row.get("low") is not None or row.get("high") is not None:
            real_cell = f"{row.get('low') or '?'}..{(row.get('high') or 0) - 1 or '?'} (cut short)"
        else:
            real_cell = "not measured"
        lines.append(
            f"| {row['case']} | {row['predicted']} | {real_cell} | "
            f"{_error(row)} | {row.get('attempts', 0)} | "
            f"{_cell_memory(row)} | {_cell_needed(row, budget)} |"
        )
    done = [r for r in rows if r.get("real")]
    exact = sum(1 for r in done if r["predicted"] == r["real"])
    within = sum(1 for r in done if abs(r["predicted"] / r["real"] - 1) <= 0.05)
    lines += [
        "",
        f"{len(done)} of {len(rows)} cases measured to the sample: {exact} exact, {within} "
        "within 5%.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--predicted", type=Path, default=RESULTS / "predicted.json")
    parser.add_argument("--measured", type=Path, default=RESULTS / "bisect_h100.json")
    parser.add_argument("--out", type=Path, default=RESULTS / "max_batch_h100.md")
    args = parser.parse_args()
    predicted = json.loads(args.predicted.read_text())
    measured = json.loads(args.measured.read_text())
    rows = [
        _row(name, pred, measured["cases"].get(name)) for name, pred in predicted["cases"].items()
    ]
    text = render(rows, predicted, measured)
    args.out.write_text(text)
    detail = args.out.with_suffix(".json")
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    detail.write_text(json.dumps({"compared": stamp, "rows": rows}, indent=1, default=str) + "\n")
    print(text)


if __name__ == "__main__":
    main()
