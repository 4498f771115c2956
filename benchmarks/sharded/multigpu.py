"""Per-rank memory of DDP and FSDP2 on two GPUs: trainfit's plan against torchrun runs of the
template it emits (`trainfit.export.train_fsdp2`).

    PYTHONPATH=src:. python -m benchmarks.sharded.multigpu configs   # CPU: writes the configs
                                                                     # and the predictions
    benchmarks/sharded/run_multigpu.sh OUTDIR                        # 2 GPUs: the runs
    PYTHONPATH=src:. python -m benchmarks.sharded.multigpu compare OUTDIR/multigpu_measured.json

`configs` plans each case with `trainfit.distributed.plan_distributed` (the strategy and two
GPUs forced, the effective batch = micro-batch x 2) and writes the fsdp2_<case>.json that
`trainfit plan --export torchrun` would write (`distributed.launch.fsdp2_settings`) into
results/multigpu_configs/, with the per-rank predictions in results/multigpu_predicted.json.
`compare` writes results/multigpu_<card>.md: per rank, device memory in use (total - free
after three steps, NCCL's buffers and the CUDA context included) against the prediction.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
CONFIGS = RESULTS / "multigpu_configs"
DEVICE = "h100"
GB = 1e9

CASES: dict[str, dict[str, object]] = {
    "gpt2-medium-s1024-b4-ddp": dict(model="gpt2-medium", seq_len=1024, batch=4, strategy="ddp"),
    "gpt2-medium-s1024-b4-fsdp2": dict(
        model="gpt2-medium", seq_len=1024, batch=4, strategy="fsdp2"
    ),
    "qwen2-0.5b-s1024-b2-ddp": dict(model="qwen2-0.5b", seq_len=1024, batch=2, strategy="ddp"),
    "qwen2-0.5b-s1024-b2-fsdp2": dict(model="qwen2-0.5b", seq_len=1024, batch=2, strategy="fsdp2"),
    "tinyllama-1.1b-s1024-b2-ckpt-ddp": dict(
        model="tinyllama-1.1b", seq_len=1024, batch=2, strategy="ddp", checkpointing=True
    ),
    "tinyllama-1.1b-s1024-b2-ckpt-fsdp2": dict(
        model="tinyllama-1.1b", seq_len=1024, batch=2, strategy="fsdp2", checkpointing=True
    ),
    "llama-3.2-1b-s2048-b1-ckpt-fsdp2": dict(
        model="llama-3.2-1b", seq_len=2048, batch=1, strategy="fsdp2", checkpointing=True
    ),
    # NB: a (1, 2) mesh: HSDP's code path (replicate x shard) on one node of two GPUs
    "llama-3.2-1b-s2048-b1-ckpt-hybrid": dict(
        model="llama-3.2-1b",
        seq_len=2048,
        batch=1,
        strategy="fsdp2-hybrid",
        checkpointing=True,
    ),
}
"""Each case: a model, sequence and micro-batch, the engine, bf16, AdamW; over 2 GPUs."""
REVISION = (
    "The model was revised after this run, from these measurements (the *blind* columns are "
    "what the configs the runs used predicted, before): (1) FSDP2's MixedPrecisionPolicy runs "
    "forward and backward on bf16 parameters without autocast, so the ops autocast keeps in "
    "fp32 (layer_norm, softmax, GPT-2's tanh GELU through pow) save bf16 activations: the "
    "FSDP2 step is traced in pure bf16 and its states rescaled to fp32; (2) FSDP2's sharded "
    "gradients are views of the reduce-scatter output, allocated on the reduce-scatter "
    "stream, whose pool the default stream's activations cannot reuse: they are counted "
    "beside the replay, not in it. DDP is unchanged: no mechanism was found for "
    "qwen2-0.5b's 2.0 GB of peak *allocated* memory beyond the single-GPU trace plus the "
    "gradient buckets (gpt2-medium's matches to 0.01 GB, tinyllama's to 0.01 GB), nor for "
    "the reserved-over-allocated gaps of DDP (gpt2-medium 0.9 GB over the replay's). "
    "llama-3.2-1b's FSDP2 row is as before (-3.3%: its reserved peak is 0.7 GB over the "
    "replay's), and so is its hybrid row: the same allocator peaks as FSDP2, 0.4 GB more "
    "device memory outside the allocator (a 2-D mesh makes its own NCCL communicators; "
    "not modelled)."
)
"""Written into the predictions (`configs`) and so into the table's header."""
TINY = {
    "tiny-ddp": dict(model="gpt2", seq_len=64, batch=2, strategy="ddp"),
    "tiny-fsdp2": dict(model="gpt2", seq_len=64, batch=2, strategy="fsdp2"),
}
"""`configs --tiny`: two small cases to run the whole path on a CPU (gloo)."""


HELDOUT: dict[str, dict[str, object]] = {
    "gpt2-large-s1024-b2-ddp": dict(model="gpt2-large", seq_len=1024, batch=2, strategy="ddp"),
    "gpt2-large-s1024-b2-fsdp2": dict(model="gpt2-large", seq_len=1024, batch=2, strategy="fsdp2"),
    "gpt2-s1024-b8-ddp": dict(model="gpt2", seq_len=1024, batch=8, strategy="ddp"),
    "qwen2-0.5b-s2048-b2-ckpt-fsdp2": dict(
        model="qwen2-0.5b", seq_len=2048, batch=2, strategy="fsdp2", checkpointing=True
    ),
    "llama-3.2-1b-s1024-b2-ckpt-ddp": dict(
        model="llama-3.2-1b", seq_len=1024, batch=2, strategy="ddp", checkpointing=True
    ),
    "tinyllama-1.1b-s2048-b1-fsdp2": dict(
        model="tinyllama-1.1b", seq_len=2048, batch=1, strategy="fsdp2"
    ),
}
"""Cases predicted with the revised model before any of them ran (`configs --heldout`): the
held-out check of the revision (results/multigpu_heldout_configs/)."""
HELDOUT_CONFIGS = RESULTS / "multigpu_heldout_configs"

TIED: dict[str, dict[str, object]] = {
    "llama-3.2-1b-s2048-b1-ddp": dict(model="llama-3.2-1b", seq_len=2048, batch=1, strategy="ddp"),
    "llama-3.2-1b-s512-b4-ckpt-ddp": dict(
        model="llama-3.2-1b", seq_len=512, batch=4, strategy="ddp", checkpointing=True
    ),
    "gpt2-large-s512-b4-ddp": dict(model="gpt2-large", seq_len=512, batch=4, strategy="ddp"),
}
"""DDP of models whose embedding and output head share one weight, built on meta by the
template that ties them again (`configs --tied`), predicted before any of them ran: the blind
check of that fix (ddp_memory_h100.md; results/ddp_tied_configs/)."""
TIED_CONFIGS = RESULTS / "ddp_tied_configs"

SETS: dict[str, tuple[dict[str, dict[str, object]], Path]] = {
    "cases": (CASES, CONFIGS),
    "tiny": (TINY, CONFIGS),
    "heldout": (HELDOUT, HELDOUT_CONFIGS),
    "tied": (TIED, TIED_CONFIGS),
}
"""`configs`' case sets by name, each with the folder its configs go to by default."""


def plan_case(case: dict[str, object]) -> tuple[Any, Any]:
    """(TrainSpec, DistributedPlan or None) of a case: its strategy over two GPUs, bf16, the
    effective batch = micro-batch x 2."""
    from trainfit.distributed import Strategy, plan_distributed
    from trainfit.hardware.catalog import get_device
    from trainfit.spec import TrainSpec

    fields = {k: v for k, v in case.items() if k != "strategy"}
    spec = TrainSpec(precision="bf16", device=DEVICE, **fields)  # type: ignore[arg-type]
    strategy = Strategy(case["strategy"])
    found = plan_distributed(
        spec, 2 * spec.batch, get_device(DEVICE), strategy=strategy, gpus=2, margin=0.0
    )
    return spec, found


def configs(name: str, out: Path) -> None:
    """Plan every case of the set `name` (`SETS`) and write its config and the predictions."""
    import torch

    from trainfit.export.torchrun import fsdp2_settings
    from trainfit.plan.words import rank_memory_dict

    predicted: dict[str, object] = {}
    out.mkdir(parents=True, exist_ok=True)
    for case_name, case in SETS[name][0].items():
        spec, found = plan_case(case)
        if found is None or found.micro_batch != spec.batch:
            raise SystemExit(f"{case_name}: the plan does not hold micro-batch {spec.batch}")
        settings = fsdp2_settings(spec, found, 2 * spec.batch)
        if name == "tiny":
            # NB: gloo on a CPU: fp32, no bf16 collectives
            settings["mixed_precision"] = {"param_dtype": "float32", "reduce_dtype": "float32"}
        (out / f"fsdp2_{case_name}.json").write_text(json.dumps(settings, indent=2) + "\n")
        predicted[case_name] = rank_memory_dict(found.memory)
        print(case_name, f"{found.memory.total_bytes / GB:.2f} GB per rank")
    record = {
        "environment": {
            "date": datetime.date.today().isoformat(),
            "host": f"{platform.system()} {platform.machine()}, CPU only",
            "torch": torch.__version__,
            "device_row": DEVICE,
            "revision": "" if name in ("heldout", "tied") else REVISION,
        },
        "cases": predicted,
    }
    (out / "predicted.json").write_text(json.dumps(record, indent=2) + "\n")


def compare(measured_file: Path, predicted_file: Path, out: Path | None) -> str:
    """The Markdown table of measured against predicted per-rank memory."""
    measured = json.loads(measured_file.read_text())
    predicted = json.loads(predicted_file.read_text())
    runs = measured["runs"]
    env = next((r["environment"] for r in runs.values() if "environment" in r), {})
    lines = [
        "# DDP and FSDP2 on two GPUs: per-rank memory, trainfit's plan vs. torchrun",
        "",
        f"Measured {env.get('date', '?')} on 2 x {env.get('device', '?')} "
        f"({'; '.join(measured.get('nvidia_smi', []))}), torch {env.get('torch', '?')} "
        f"(CUDA {env.get('cuda', '?')}, NCCL {env.get('nccl', '?')}), transformers "
        f"{measured.get('transformers', '?')}: `benchmarks/sharded/run_multigpu.sh`, one "
        "`torchrun --nproc-per-node=2 train_fsdp2.py` per case with the config trainfit "
        f"emitted (results/{predicted_file.parent.name}/), three steps, bf16, AdamW. Predicted "
        f"{predicted['environment']['date']} on a CPU-only host with torch "
        f"{predicted['environment']['torch']}: `trainfit.distributed.plan_distributed` for the "
        f"`{predicted['environment']['device_row']}` row. Measured = device memory in use "
        "(total - free after the steps), the larger rank; error = predicted / measured - 1.",
    ]
    revision = predicted["environment"].get("revision")
    flag = "--tied" if predicted_file.resolve().parent == TIED_CONFIGS.resolve() else "--heldout"
    if revision:
        lines += ["", revision]
    else:
        lines += [
            "",
            "Held out: these cases were not used to revise the model. Their configs and "
            f"predictions were committed before they ran (`multigpu configs {flag}`), so the "
            "blind and current columns agree until the model changes again.",
        ]
    lines += [
        "",
        "| case | strategy | rank peak allocated GB | rank peak reserved GB | measured GB "
        "| blind predicted GB | blind error | predicted GB | error |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    errors: dict[str, list[float]] = {}
    for name, guess in predicted["cases"].items():
        record = runs.get(name)
        if record is None or any(r.get("error") for r in record.get("ranks", [{}])):
            why = "no result" if record is None else record["ranks"][0].get("error", "")
            lines.append(
                f"| {name} | {guess['strategy']} | - | - | - | - | - | "
                f"{guess['per_rank_bytes'] / GB:.2f} | failed: {why} |"
            )
            continue
        ranks = record["ranks"]
        # NB: the run's config carries the prediction it was made with (blind)
        blind = record["config"].get("predicted_per_rank_bytes")
        if "device_used_bytes" not in ranks[0]:  # NB: a CPU run (tiny mode): no device memory
            lines.append(
                f"| {name} | {guess['strategy']} | - | - | - | - | - | "
                f"{guess['per_rank_bytes'] / GB:.2f} | CPU run |"
            )
            continue
        used = max(r["device_used_bytes"] for r in ranks)
        alloc = max(r["peak_allocated_bytes"] for r in ranks)
        reserved = max(r["peak_reserved_bytes"] for r in ranks)
        error = guess["per_rank_bytes"] / used - 1
        errors.setdefault(guess["strategy"], []).append(error)
        before = "- | -" if blind is None else f"{blind / GB:.2f} | {blind / used - 1:+.1%}"
        lines.append(
            f"| {name} | {guess['strategy']} | {alloc / GB:.2f} | {reserved / GB:.2f} | "
            f"{used / GB:.2f} | {before} | {guess['per_rank_bytes'] / GB:.2f} | {error:+.1%} |"
        )
    lines += ["", "| strategy | cases | median error | worst |", "|---|---:|---:|---:|"]
    every = []
    for strategy, errs in errors.items():
        every += errs
        worst = max(errs, key=abs)
        lines.append(
            f"| {strategy} | {len(errs)} | {statistics.median(errs):+.1%} | {worst:+.1%} |"
        )
    if every:
        lines.append(
            f"| all | {len(every)} | {statistics.median(every):+.1%} | {max(every, key=abs):+.1%} |"
        )
    text = "\n".join(lines) + "\n"
    if out is not None:
        out.write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("configs")
    c.add_argument("--tiny", action="store_true", help="two small cases for a CPU run")
    c.add_argument(
        "--heldout", action="store_true", help="the held-out cases (default out: their folder)"
    )
    c.add_argument(
        "--tied", action="store_true", help="DDP of tied models (default out: their folder)"
    )
    c.add_argument("--out", default=None, help="default results/multigpu_configs")
    m = sub.add_parser("compare")
    m.add_argument("measured")
    m.add_argument("--predicted", default=str(CONFIGS / "predicted.json"))
    m.add_argument("--card", default="h100")
    m.add_argument("--out", default=None, help="default results/multigpu_<card>.md")
    args = parser.parse_args()
    if args.command == "configs":
        name = next((n for n in ("tiny", "heldout", "tied") if getattr(args, n)), "cases")
        configs(name, Path(args.out) if args.out else SETS[name][1])
    else:
        out = Path(args.out) if args.out else RESULTS / f"multigpu_{args.card}.md"
        print(compare(Path(args.measured), Path(args.predicted), out))


if __name__ == "__main__":
    main()
