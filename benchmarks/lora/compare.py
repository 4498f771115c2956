"""The LoRA table from the JSON `benchmarks/lora/run_gpu.py` left in a directory.

PYTHONPATH=src:. python -m benchmarks.lora.compare DIR > benchmarks/lora/results/lora_h100.md
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

GiB = 1 << 30


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / GiB:.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def _error(estimated: float | None, measured: float | None) -> float | None:
    if estimated is None or not measured:
        return None
    return estimated / measured - 1


def _setting(spec: dict[str, Any], lora: dict[str, Any]) -> str:
    what = "QLoRA" if lora["qlora"] else "LoRA"
    targets = ",".join(lora["targets"]) or "default"
    ckpt = " ckpt" if spec.get("checkpointing") else ""
    return (
        f"{what} r={lora['rank']} ({targets}), {spec['precision']}{ckpt}, "
        f"b{spec['batch']} s{spec['seq_len']}"
    )


def _summary(name: str, errors: list[float]) -> str:
    if not errors:
        return f"- {name}: no rows"
    worst = max(errors, key=abs)
    return (
        f"- {name}: median |error| {statistics.median(abs(e) for e in errors):.1%}, "
        f"worst {worst:+.1%} ({len(errors)} rows)"
    )


def table(directory: Path) -> str:
    env = json.loads((directory / "environment.json").read_text())
    lines = [
        "# LoRA through peft: `trainfit measure --lora` vs the estimate",
        "",
        f"Card: {env.get('nvidia_smi')} (name, driver, memory); torch {env.get('torch')} "
        f"(CUDA {env.get('cuda')}), transformers {env.get('transformers')}, peft "
        f"{env.get('peft')}, Python {env.get('python')}; {env.get('date', '')[:10]}.",
        "",
        "Made by `python -m benchmarks.lora.run_gpu --out DIR` then "
        "`python -m benchmarks.lora.compare DIR`. Each row is `trainfit measure MODEL --lora R "
        "... --json` in a fresh process (2 warm-up + 5 timed steps; peft's own LoRA modules on "
        "the real model) with the estimate for the matched catalog card beside it. error = "
        "estimate / measured - 1. *needed*: peak reserved + the process's memory outside the "
        "allocator (measured) vs peak reserved + runtime context (estimated).",
        "",
        "| case | setting | trainable / total params | est. needed GiB | measured needed GiB "
        "| needed error | allocated error | optimizer state est. / measured MiB "
        "| measured step ms | step error |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    needed: list[float] = []
    allocated: list[float] = []
    steps: list[float] = []
    for path in sorted((directory / "lora").glob("*.json")):
        record = json.loads(path.read_text())
        result = record.get("result")
        if record.get("returncode") != 0 or not result:
            lines.append(f"| {path.stem} | failed: {record.get('stderr', '')[-200:]!r} |")
            continue
        est, m = result["estimate"], result["measured"]
        d = _error(est["device_memory_needed_bytes"], m["device_needed_bytes"])
        a = _error(est["peak_allocated_bytes"], m["peak_allocated_bytes"])
        est_step = (est.get("time") or {}).get("step_seconds")
        t = _error(est_step, m["median_step_seconds"])
        for bucket, value in ((needed, d), (allocated, a), (steps, t)):
            if value is not None:
                bucket.append(value)
        opt_est = est["breakdown"]["optimizer_state"] / 2**20
        opt_measured = (m["optimizer_state_bytes"] or 0) / 2**20
        step_ms = m["median_step_seconds"]
        lines.append(
            f"| {path.stem} | {_setting(est['spec'], est['lora'])} "
            f"| {est['trainable_parameters'] / 1e6:.2f}M / {est['parameters'] / 1e6:.0f}M "
            f"| {_gib(est['device_memory_needed_bytes'])} | {_gib(m['device_needed_bytes'])} "
            f"| {_pct(d)} | {_pct(a)} | {opt_est:.1f} / {opt_measured:.1f} "
            f"| {'-' if step_ms is None else f'{step_ms * 1000:,.0f}'} | {_pct(t)} |"
        )
    for path in sorted((directory / "qlora").glob("*.json")):
        record = json.loads(path.read_text())
        result = record.get("result")
        if record.get("returncode") != 0 or not result:
            lines.append(f"| {path.stem} | estimate failed: {record.get('stderr', '')[-200:]!r} |")
            continue
        refused = record.get("measure", {}).get("stderr", "").strip().splitlines()
        why = "not measured: no bitsandbytes on the GPU machine"
        if refused and "bitsandbytes" in refused[-1]:
            why += " (`trainfit measure --qlora` refuses in one line)"
        lines.append(
            f"| {path.stem} | {_setting(result['spec'], result['lora'])} (modelled) "
            f"| {result['trainable_parameters'] / 1e6:.2f}M / {result['parameters'] / 1e6:.0f}M "
            f"| {_gib(result['device_memory_needed_bytes'])} | {why} | - | - "
            f"| {result['breakdown']['optimizer_state'] / 2**20:.1f} / - | - | - |"
        )
    lines += [
        "",
        _summary("device memory needed", needed),
        _summary("peak allocated", allocated),
        _summary("step time", steps),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m benchmarks.lora.compare DIR")
    sys.stdout.write(table(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
