"""Turn `run_gpu.py`'s JSON into the two committed tables: generation and DPO, predicted beside
measured, each row's error, median and worst.

    PYTHONPATH=src:. python -m benchmarks.inference.compare --measured DIR \
        [--results benchmarks/inference/results] [--suffix h100]

Writes RESULTS/inference_<suffix>.md and RESULTS/preference_<suffix>.md (atomically).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from benchmarks.inference.run_gpu import DPO_CASES, GEN_MODELS

GiB = 1 << 30


def _err(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or not measured:
        return None
    return (predicted - measured) / measured


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def _summary(name: str, errors: list[float | None]) -> str:
    known = [abs(e) for e in errors if e is not None]
    if not known:
        return f"- {name}: no rows"
    return f"- {name}: median |error| {statistics.median(known):.1%}, worst {max(known):.1%}"


def _header(title: str, env: dict[str, Any]) -> list[str]:
    return [
        f"# {title}",
        "",
        f"Card: {env.get('card', env.get('device'))}; driver {env.get('driver', '-')}; "
        f"torch {env.get('torch')}; transformers {env.get('transformers')}; "
        f"measured {env.get('date')}.",
        "Made by `benchmarks/inference/run_gpu.py` (one fresh process per model or case) and "
        "`benchmarks/inference/compare.py`; error = (predicted - measured) / measured.",
        "",
    ]


def generation_table(measured: Path, env: dict[str, Any], device: str) -> str:
    from trainfit.estimator.generation import estimate_inference

    lines = _header("Greedy generation: estimate_inference vs measured (bf16)", env)
    lines += [
        "Device memory used = peak reserved + (memory in use on the GPU outside the allocator "
        "after the run: the CUDA context and libraries; the GPU held nothing else); it is "
        "compared with the estimate's device memory needed. Decode tokens/s = "
        "batch x (new tokens - 1) / (generate - prefill) time. int8 and int4 are modelled "
        "only: this GPU box has no bitsandbytes (nor GPTQ/AWQ kernels), so they are not in "
        "this table.",
        "",
        "| model | batch | context | new | peak alloc GiB (pred / meas / err) | peak reserved "
        "GiB | device used GiB | prefill ms | decode tok/s | predicted decode bound |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    errors: dict[str, list[float | None]] = {
        k: [] for k in ("alloc", "reserved", "used", "prefill", "decode")
    }
    for model in GEN_MODELS:
        path = measured / f"gen_{model}.json"
        if not path.exists():
            lines.append(f"| {model} | failed: no measurement | | | | | | | | |")
            continue
        data = json.loads(path.read_text())
        for point in data["points"]:
            est = estimate_inference(
                data.get("built_from", model),
                context=point["context"],
                new_tokens=point["new_tokens"],
                batch=point["batch"],
                precision="bf16",
                device=device,
            )
            used = None
            if point["used"] is not None:
                # NB: `baseline_used` was read after torch made its CUDA context (mem_get_info
                # makes it), so it holds this process's context, and `others_used` (NVML's
                # v1 `used` before the context, in the gpt2 rerun) holds the driver's reserve
                # (480 MiB on the H100), which mem_get_info's `used` also counts: neither is
                # another process's memory. Other processes' memory is `other_processes`
                # (NVML's process list before the context); absent from the 2026-11-26 runs,
                # where nvidia-smi read 0 MiB used on both GPUs before each session
                # (raw_h100/nvidia_smi_before.txt).
                outside = point["used"] - point["reserved"] - (point.get("other_processes") or 0)
                used = point["peak_reserved"] + outside
            pairs = {
                "alloc": (est.peak_allocated_bytes, point["peak_allocated"]),
                "reserved": (est.peak_reserved_bytes, point["peak_reserved"]),
                "used": (est.device_memory_needed_bytes, used),
                "prefill": (est.prefill_seconds * 1e3, point["prefill_seconds"] * 1e3),
                "decode": (est.tokens_per_second, point["decode_tokens_per_second"]),
            }
            cells = []
            for key, (p, m) in pairs.items():
                e = _err(p, m)
                errors[key].append(e)
                scale = GiB if key in ("alloc", "reserved", "used") else 1
                fmt = "{:.3f}" if scale == GiB else "{:,.1f}"
                ms = "-" if m is None else fmt.format(m / scale)
                cells.append(f"{fmt.format(p / scale)} / {ms} / {_pct(e)}")
            bound = (
                "host"
                if est.decode_seconds_per_token <= est.decode_host_seconds * 1.0001
                else "device"
            )
            lines.append(
                f"| {model} | {point['batch']} | {point['context']} | {point['new_tokens']} | "
                + " | ".join(cells)
                + f" | {bound} |"
            )
    lines += ["", "Summary:"]
    names = {
        "alloc": "peak allocated",
        "reserved": "peak reserved",
        "used": "device memory",
        "prefill": "prefill time",
        "decode": "decode tokens/s",
    }
    lines += [_summary(names[k], v) for k, v in errors.items()]
    return "\n".join(lines) + "\n"


def preference_table(measured: Path, env: dict[str, Any], device: str) -> str:
    import trainfit
    from trainfit.spec import TrainSpec

    lines = _header("DPO training steps: estimate vs trainfit.measure (bf16 autocast, AdamW)", env)
    lines += [
        "Batch = preference pairs (chosen + rejected, one forward of 2 x batch sequences). "
        "Measured with `trainfit.measure.measure()` (2 warm-up + 3 steps), the same "
        "build_program path the estimate traces.",
        "",
        "| case | pairs x seq | reference | peak alloc GiB (pred / meas / err) | peak reserved "
        "GiB | device needed GiB | parameters GiB | step ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    errors: dict[str, list[float | None]] = {
        k: [] for k in ("alloc", "reserved", "needed", "params", "step")
    }
    for case in DPO_CASES:
        path = measured / f"dpo_{case}.json"
        if not path.exists():
            lines.append(f"| {case} | failed: no measurement | | | | | | |")
            continue
        data = json.loads(path.read_text())
        spec = TrainSpec(**data["spec"], device=device)
        est = trainfit.estimate(spec)
        m = data["measured"]
        step = est.step_time.seconds * 1e3 if est.step_time else None
        pairs = {
            "alloc": (est.peak_allocated_bytes, m["peak_allocated_bytes"]),
            "reserved": (est.peak_reserved_bytes, m["peak_reserved_bytes"]),
            "needed": (est.device_memory_needed_bytes, m["device_needed_bytes"]),
            "params": (est.breakdown.parameters, m["parameter_bytes"]),
            "step": (step, (m["median_step_seconds"] or 0) * 1e3),
        }
        cells = []
        for key, (p, q) in pairs.items():
            e = _err(p, q)
            errors[key].append(e)
            scale = 1 if key == "step" else GiB
            fmt = "{:,.1f}" if key == "step" else "{:.3f}"
            ps = "-" if p is None else fmt.format(p / scale)
            qs = "-" if q is None else fmt.format(q / scale)
            cells.append(f"{ps} / {qs} / {_pct(e)}")
        lines.append(
            f"| {case} | {spec.batch} x {spec.seq_len} | {spec.reference.value} | "
            + " | ".join(cells)
            + " |"
        )
    lines += ["", "Summary:"]
    names = {
        "alloc": "peak allocated",
        "reserved": "peak reserved",
        "needed": "device memory needed",
        "params": "parameters (reference included)",
        "step": "step time",
    }
    lines += [_summary(names[k], v) for k, v in errors.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measured", required=True, help="run_gpu.py's --out directory")
    parser.add_argument("--results", default="benchmarks/inference/results")
    parser.add_argument("--suffix", default="h100")
    parser.add_argument("--device", default="h100", help="catalog row the estimates are for")
    args = parser.parse_args()
    from trainfit.io import write_atomically

    measured = Path(args.measured)
    env = json.loads((measured / "environment.json").read_text())
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    for name, text in (
        (f"inference_{args.suffix}.md", generation_table(measured, env, args.device)),
        (f"preference_{args.suffix}.md", preference_table(measured, env, args.device)),
    ):
        write_atomically(results / name, text)
        print(f"wrote {results / name}")


if __name__ == "__main__":
    main()
