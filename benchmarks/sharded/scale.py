"""Multi-GPU plans beyond two GPUs (4 and 8 H100s): trainfit's per-rank memory, step time and
collectives against torchrun runs of the files `trainfit plan --export torchrun` writes.

    PYTHONPATH=src:. python -m benchmarks.sharded.scale configs      # CPU: plan every case with
        # the CLI (`trainfit plan ... --json --export torchrun`), keep its files and predictions
    benchmarks/sharded/run_scale.sh OUT 4     # on 4 GPUs: each 4-GPU case's launch_h100.sh
    PYTHONPATH=src:. python -m benchmarks.sharded.scale compare OUT/scale_measured.json

`configs` writes results/scale_configs/<case>/ (launch_h100.sh, fsdp2_h100.json,
train_fsdp2.py: the export, unchanged) and results/scale_configs/predicted.json (the plan's
`distributed` JSON of each case). The plan chooses the micro-batch (the largest divisor of the
per-GPU share of the effective batch that fits 90% of the card) and gradient checkpointing
(off first) itself; the effective batch is the micro-batch we aim at x the GPUs (no
accumulation), so a run is a few short optimizer steps.

`configs --tiny --out DIR` writes two-GPU gpt2 cases for a dry run on the CPU
(`run_scale.sh OUT 2 DIR cpu`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import platform
import shutil
import statistics
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
CONFIGS = RESULTS / "scale_configs"
DEVICE = "h100"
GB = 1e9

CASES: dict[str, dict[str, Any]] = {
    # --- 4 GPUs: run on nvidia-h100-x4 ---
    "qwen2.5-7b-s2048-e8-fsdp2-g4": dict(
        model="qwen2.5-7b", seq=2048, effective_batch=8, gpus=4, strategy="fsdp2"
    ),
    "qwen2.5-7b-s4096-e8-fsdp2-g4": dict(
        model="qwen2.5-7b", seq=4096, effective_batch=8, gpus=4, strategy="fsdp2"
    ),
    "qwen2.5-7b-s8192-e4-fsdp2-g4": dict(
        model="qwen2.5-7b", seq=8192, effective_batch=4, gpus=4, strategy="fsdp2"
    ),
    "qwen2.5-7b-dpo-s1024-e8-fsdp2-g4": dict(
        model="qwen2.5-7b", seq=1024, effective_batch=8, gpus=4, strategy="fsdp2", dpo=True
    ),
    "llama-3.2-1b-s1024-e8-ddp-g4": dict(
        model="llama-3.2-1b", seq=1024, effective_batch=8, gpus=4, strategy="ddp"
    ),
    # --- 8 GPUs: predicted now, for a run on an 8-GPU kind ---
    "qwen2.5-14b-dpo-s1024-e16-fsdp2-g8": dict(
        model="qwen2.5-14b", seq=1024, effective_batch=16, gpus=8, strategy="fsdp2", dpo=True
    ),
    "qwen2.5-7b-s2048-e16-fsdp2-g8": dict(
        model="qwen2.5-7b", seq=2048, effective_batch=16, gpus=8, strategy="fsdp2"
    ),
    "llama-3.2-1b-s1024-e16-ddp-g8": dict(
        model="llama-3.2-1b", seq=1024, effective_batch=16, gpus=8, strategy="ddp"
    ),
}
"""Each case: the model, sequence, effective batch (micro-batch aimed at x GPUs), GPUs and
engine, bf16, AdamW; `dpo`: DPO with a frozen reference copy in the config's dtype (bf16),
the effective batch counting pairs (seed 003's preference training)."""
TINY: dict[str, dict[str, Any]] = {
    "tiny-fsdp2-g2": dict(model="gpt2", seq=64, effective_batch=4, gpus=2, strategy="fsdp2"),
    "tiny-ddp-g2": dict(model="gpt2", seq=64, effective_batch=4, gpus=2, strategy="ddp"),
    "tiny-dpo-fsdp2-g2": dict(
        model="gpt2", seq=64, effective_batch=2, gpus=2, strategy="fsdp2", dpo=True
    ),
}
"""`configs --tiny`: the whole path on two CPU ranks (gloo, fp32 collectives)."""


FINDINGS = """## Reading (written after the run; the model was not revised: predicted = blind)

- Device memory needed, the plan's figure: FSDP2 -2.1%, -3.7%, -2.6% (7B full fine-tune,
  with and without checkpointing) and +1.1% (7B DPO with its bf16 reference sharded):
  median -2.4%, worst -3.7%, as on two GPUs. Every run fitted its card, but the 7B at
  seq 4096 used 77.1 GB, over the plan's 90% budget (76.5 GB) that its 74.2 GB prediction
  kept inside.
- DDP of Llama-3.2-1B (no checkpointing, micro-batch 2): -13.2%. The allocator held 6.3 GB
  more allocated memory than the replay plus DDP's buckets (36.0 against 29.7 GB); NCCL and
  the context are as predicted. On two GPUs the held-out DDP rows were within 2% (the same
  model with checkpointing -1.5%); qwen2-0.5b's DDP row there had 2.0 GB unexplained too.
  Not explained here, not revised.
- Peak allocated under FSDP2 is over-predicted (+6% to +28%) while the device total is
  right: the real allocator reserves 8.7 to 15.0 GB over its allocated peak (the replay
  1.7 GB at seq 2048), so the total agrees by compensation, not part by part.
- NCCL at 4 ranks: 0.487 GB after the eager init, 0.986 GB after the first collective,
  per rank, in every run and in the probe; nothing more after 1 GiB all-reduces, the 7B
  block's all-gather and reduce-scatter, or the training steps. The two-rank figure the model
  uses (0.979 GB, 2 x H200) is within 0.7%. Memory outside PyTorch's allocator after the
  steps: 1.70 GB (predicted context + NCCL: 1.78 GB).
- Step time: FSDP2 -18%, -15%, +3% and -29% (DPO); DDP -6%. The collectives' kernels took
  about what was predicted for them (0.21 s against 0.20 s at seq 2048; 0.47 against 0.40 at
  seq 4096) and the profiled steps exposed at most 0.03 to 0.05 s of them (0 predicted) for
  the full fine-tunes, 0.18 s for DPO (0.06 predicted): the step's shortfall is compute, not
  communication. NCCL kernel time includes waiting for the other ranks (0.20 to 0.36 s across
  the ranks at seq 8192).
- Collectives alone run faster than the model's fixed 227 GB/s (NCCL's efficiency at DDP's
  25 MB bucket): 214 GB/s at 25 MB, but 301 to 345 GB/s for the 7B block's all-gather and
  reduce-scatter and a 1 GiB all-reduce; inside the step, overlapped with compute, they
  matched the model's time.
"""
"""Written into results/scale_<card>.md under the header (what the run showed)."""


def plan_args(case: dict[str, Any], out: Path) -> list[str]:
    """The `trainfit plan` command line of a case (its export into `out`)."""
    args = [
        "plan", case["model"], "--seq", str(case["seq"]),
        "--effective-batch", str(case["effective_batch"]), "--precision", "bf16",
        "--device", DEVICE, "--strategy", case["strategy"], "--gpus", str(case["gpus"]),
        "--jobs", "1", "--json", "--export", "torchrun", "--export-dir", str(out),
    ]  # fmt: skip
    if case.get("dpo"):
        args += ["--preference", "dpo", "--reference-dtype", "auto"]
    return args


def plan_case(name: str, case: dict[str, Any], out: Path) -> dict[str, Any]:
    """Run `trainfit plan` for a case, its files into out/<name>/; the plan's distributed
    JSON (None when nothing fits)."""
    from trainfit.cli.main import main

    folder = out / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    text, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(errors):
        code = main(plan_args(case, folder))
    if code != 0:
        raise SystemExit(f"{name}: trainfit plan failed: {errors.getvalue().strip()}")
    device = json.loads(text.getvalue())["devices"][0]
    found = device.get("distributed")
    if found is None or not (folder / "launch_h100.sh").exists():
        shutil.rmtree(folder)
        return {"case": case, "fits": False, "verdict": device.get("verdict", device)}
    return {
        "case": case,
        "fits": True,
        "plan": found,
        "command": ["trainfit", *plan_args(case, Path("results/scale_configs") / name)],
    }


def configs(tiny: bool, out: Path) -> None:
    """Plan every case and write its export and the predictions."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    predicted: dict[str, Any] = {}
    for name, case in (TINY if tiny else CASES).items():
        predicted[name] = plan_case(name, case, out)
        if tiny:
            # NB: gloo on a CPU: fp32, no bf16 collectives
            path = out / name / "fsdp2_h100.json"
            settings = json.loads(path.read_text())
            settings["mixed_precision"] = {"param_dtype": "float32", "reduce_dtype": "float32"}
            path.write_text(json.dumps(settings, indent=2) + "\n")
        plan = predicted[name].get("plan")
        print(name, "does not fit" if plan is None else
              f"{plan['memory']['per_rank_bytes'] / GB:.2f} GB per rank, "
              f"micro {plan['micro_batch']} x {plan['grad_accum']}, ckpt {plan['checkpointing']}, "
              f"step {plan['step_seconds']:.3f} s")  # fmt: skip
    record = {
        "environment": {
            "date": datetime.date.today().isoformat(),
            "host": f"{platform.system()} {platform.machine()}, CPU only",
            "torch": torch.__version__,
            "device_row": DEVICE,
        },
        "cases": predicted,
    }
    (out / "predicted.json").write_text(json.dumps(record, indent=2) + "\n")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _row(name: str, guess: dict[str, Any], run: dict[str, Any] | None) -> str:
    """One line of the measured-vs-predicted table."""
    plan = guess["plan"]
    mem = plan["memory"]
    head = (
        f"| {name} | {plan['strategy']} | {plan['gpus']} | {plan['micro_batch']} x "
        f"{plan['grad_accum']} | {'yes' if plan['checkpointing'] else 'no'} | "
    )
    predicted = (
        f"{mem['per_rank_bytes'] / GB:.2f}",
        f"{mem['peak_allocated_bytes'] / GB:.2f}",
        f"{plan['step_seconds']:.3f}",
        f"{plan['comm']['seconds']:.3f} ({plan['comm']['exposed_seconds']:.3f})",
    )
    if run is None:
        return (
            head
            + " | ".join(f"{p} | not run | -" for p in predicted[:3])
            + (f" | {predicted[3]} | not run |")
        )
    ranks = run["ranks"]
    if any(r.get("error") for r in ranks):
        why = next(r["error"] for r in ranks if r.get("error"))
        used = max(r.get("device_used_bytes", 0) for r in ranks)
        return head + f"{predicted[0]} | failed at {used / GB:.2f} GB: {why} | | | | | | | |"
    used = max(r["device_used_bytes"] for r in ranks)
    alloc = max(r["peak_allocated_bytes"] for r in ranks)
    # NB: the first step builds the optimizer state and warms the kernels: left out
    step = _median([s for r in ranks for s in r["step_seconds"][1:]])
    nccl = max(r.get("nccl_kernel_seconds", float("nan")) for r in ranks)
    exposed = max(
        r.get("profiled_step_seconds", float("nan")) - r.get("other_kernel_seconds", 0.0)
        for r in ranks
    )
    return (
        head
        + " | ".join(
            [
                f"{predicted[0]} | {used / GB:.2f} | {mem['per_rank_bytes'] / used - 1:+.1%}",
                f"{predicted[1]} | {alloc / GB:.2f} | "
                f"{mem['peak_allocated_bytes'] / alloc - 1:+.1%}",
                f"{predicted[2]} | {step:.3f} | {plan['step_seconds'] / step - 1:+.1%}",
                f"{predicted[3]} | {nccl:.3f} ({max(exposed, 0.0):.3f})",
            ]
        )
        + " |"
    )


def nccl_lines(measured: dict[str, Any]) -> list[str]:
    """The NCCL memory table: each run's and the probe's per-rank figures."""
    lines = [
        "| run | ranks | after init - context GB | after first collective - context GB "
        "| after the steps: outside the allocator GB (context included) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, run in {**measured.get("runs", {}), **measured.get("probes", {})}.items():
        ranks = run.get("ranks", [])
        if not ranks or "context_used_bytes" not in ranks[0]:
            continue
        init = max(r["after_init_used_bytes"] - r["context_used_bytes"] for r in ranks)
        first = max(r["after_first_collective_used_bytes"] - r["context_used_bytes"] for r in ranks)
        outside = max(r.get("outside_allocator_bytes", 0) for r in ranks)
        lines.append(
            f"| {name} | {len(ranks)} | {init / GB:.3f} | {first / GB:.3f} | {outside / GB:.3f} |"
        )
    return lines


def probe_lines(measured: dict[str, Any]) -> list[str]:
    """The NCCL probe's bus bandwidth (the slowest rank) and the model's figure."""
    from trainfit.hardware.catalog import get_device
    from trainfit.timing.run import NCCL_EFFICIENCY, interconnect_gbs

    model = interconnect_gbs(get_device(DEVICE), 4) * NCCL_EFFICIENCY
    lines = [
        "| probe | ranks | median ms | bus GB/s (slowest rank) | the model's GB/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, probe in measured.get("probes", {}).items():
        ranks = probe["ranks"]
        for test in ranks[0]["probes"]:
            slowest = max(ranks, key=lambda r: r["probes"][test]["seconds"])["probes"][test]
            lines.append(
                f"| {name}: {test} | {len(ranks)} | {slowest['seconds'] * 1e3:.2f} | "
                f"{slowest['bus_gbs']:.0f} | {model:.0f} |"
            )
    return lines


def compare(measured_file: Path, predicted_file: Path, out: Path | None) -> str:
    """The Markdown table of the runs against the blind predictions."""
    measured = json.loads(measured_file.read_text())
    predicted = json.loads(predicted_file.read_text())
    runs = measured["runs"]
    env = next((r["environment"] for r in runs.values() if "environment" in r), {})
    smi = env.get("nvidia_smi", [])
    lines = [
        "# FSDP2 and DDP on 4 GPUs: trainfit's blind plan vs. torchrun",
        "",
        f"Measured {env.get('date', '?')} on {len(smi)} x {env.get('device', '?')} "
        f"(driver {smi[0].split(', ')[-1] if smi else '?'}), torch {env.get('torch', '?')} "
        f"(CUDA {env.get('cuda', '?')}, NCCL {env.get('nccl', '?')}), transformers "
        f"{measured.get('transformers', '?')}, NCCL_NVLS_ENABLE={measured.get('nvls', '?')}: "
        "`benchmarks/sharded/run_scale.sh`, each case's `launch_h100.sh` as `trainfit plan "
        "--export torchrun` wrote it (results/scale_configs/<case>/), run with `--steps "
        f"{next(iter(runs.values()))['steps'] if runs else '?'} --profile --out`. Predicted "
        f"{predicted['environment']['date']} on a CPU-only host (torch "
        f"{predicted['environment']['torch']}) and committed before the run.",
        "",
        "Memory: measured = device memory in use (total - free) after the steps, the larger "
        "rank; peak allocated = `torch.cuda.max_memory_allocated`, the larger rank; error = "
        "predicted / measured - 1. Step: the median of each rank's optimizer steps after the "
        "first. Collectives: predicted all of them (not hidden, in brackets); measured the "
        "NCCL kernels' time in one profiled step (larger rank), and in brackets that step's "
        "wall time less its other kernels' time (an upper bound of what the collectives "
        "added; CPU gaps count in it).",
        "",
        "| case | engine | GPUs | micro x accum | ckpt | predicted GB | measured GB | error "
        "| predicted peak alloc GB | measured | error | predicted step s | measured | error "
        "| predicted collectives s (exposed) | measured NCCL kernels s (step - other kernels) |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    skipped = []
    for name, guess in predicted["cases"].items():
        if not guess["fits"]:
            skipped.append(f"- {name}: the plan says it does not fit ({guess['verdict']})")
            continue
        lines.append(_row(name, guess, runs.get(name)))
    lines += ["", FINDINGS.strip(), "", "## NCCL's device memory per rank", ""]
    lines += nccl_lines(measured)
    lines += ["", "## Collectives alone (the NCCL probe)", "", *probe_lines(measured)]
    lines += ["", "## nvidia-smi per GPU while each run's ranks were alive (after the steps)", ""]
    for name, run in runs.items():
        used = [line.split(", ")[2] for line in run["environment"].get("nvidia_smi", [])]
        lines.append(f"- {name}: {'; '.join(used)}")
    if skipped:
        lines += ["", *skipped]
    text = "\n".join(lines) + "\n"
    if out is not None:
        out.write_text(text)
    return text


def blind(predicted_file: Path, out: Path) -> str:
    """The committed predictions as a table (before any run)."""
    predicted = json.loads(predicted_file.read_text())
    env = predicted["environment"]
    lines = [
        "# Blind predictions for 4 and 8 GPUs (committed before any run)",
        "",
        f"Predicted {env['date']} on a CPU-only host (torch {env['torch']}) for the "
        f"`{env['device_row']}` row: `python -m benchmarks.sharded.scale configs`, each case "
        "through `trainfit plan MODEL --seq S --effective-batch E --precision bf16 --device "
        "h100 --strategy ENGINE --gpus N --json --export torchrun` (`--preference dpo "
        "--reference-dtype auto` for DPO). The plan chose the micro-batch, accumulation and "
        "checkpointing. Per rank: device memory needed (the plan's figure), the allocator's "
        "peak allocated, the step, and the collectives (all of them; not hidden in brackets).",
        "",
        "| case | engine | GPUs | micro x accum | ckpt | per-rank GB | peak allocated GB "
        "| step s | collectives s (exposed) | GB sent per GPU per step |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, guess in predicted["cases"].items():
        if not guess["fits"]:
            lines.append(f"| {name} | does not fit: {guess['verdict']} |")
            continue
        plan, mem = guess["plan"], guess["plan"]["memory"]
        comm = plan["comm"]
        lines.append(
            f"| {name} | {plan['strategy']} | {plan['gpus']} | {plan['micro_batch']} x "
            f"{plan['grad_accum']} | {'yes' if plan['checkpointing'] else 'no'} | "
            f"{mem['per_rank_bytes'] / GB:.2f} | {mem['peak_allocated_bytes'] / GB:.2f} | "
            f"{plan['step_seconds']:.3f} | {comm['seconds']:.3f} ({comm['exposed_seconds']:.3f}) "
            f"| {comm['bytes_per_gpu'] / GB:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    out.write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("configs")
    c.add_argument("--tiny", action="store_true", help="two-GPU gpt2 cases for a CPU dry run")
    c.add_argument("--out", default=None, help="default results/scale_configs")
    m = sub.add_parser("compare")
    m.add_argument("measured")
    m.add_argument("--predicted", default=str(CONFIGS / "predicted.json"))
    m.add_argument("--out", default=None, help="default results/scale_<card>.md")
    m.add_argument("--card", default="h100")
    sub.add_parser("blind", help="results/scale_blind.md from the committed predictions")
    args = parser.parse_args()
    if args.command == "blind":
        print(blind(CONFIGS / "predicted.json", RESULTS / "scale_blind.md"))
    elif args.command == "configs":
        configs(args.tiny, Path(args.out) if args.out else CONFIGS)
    else:
        out = Path(args.out) if args.out else RESULTS / f"scale_{args.card}.md"
        print(compare(Path(args.measured), Path(args.predicted), out))


if __name__ == "__main__":
    main()
