"""The sharded and CPU-offloaded table: what `trainfit plan` models per GPU against FSDP2 runs.

    PYTHONPATH=src:. python -m benchmarks.sharded.compare   # writes results/sharded_h200.md

Reads results/predicted.json (`predict.py`, CPU only) and results/measured_h200.json
(`run_gpu.sh` on two GPUs). Error = predicted / measured - 1 on the device memory in use
(total - free after the steps, the largest over the ranks).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
GB = 1e9
RUNS = (
    ("1gpu_offload", "0", "1 GPU, states in CPU memory (CPUOffloadPolicy)"),
    ("2gpu_shard", "2", "2 GPUs, states sharded (fully_shard)"),
    ("1gpu_shard", "1", "1 GPU, fully_shard (no sharding: the engine's own cost)"),
)


def main() -> None:
    predicted = json.loads((RESULTS / "predicted.json").read_text())
    measured = json.loads((RESULTS / "measured_h200.json").read_text())
    runs = measured["runs"]
    env = next(iter(runs.values()))["environment"]
    lines = [
        "# Sharded and offloaded training steps: modelled per GPU vs. FSDP2 on two GPUs",
        "",
        f"Measured {env['date']} on 2 x {env['device']} ({'; '.join(measured['nvidia_smi'])}), "
        f"torch {env['torch']} (CUDA {env['cuda']}, NCCL {env['nccl']}), transformers "
        f"{env['transformers']}: `benchmarks/sharded/run_gpu.sh`, one torchrun per run, three "
        "steps, bf16 via MixedPrecisionPolicy, gradient checkpointing, AdamW. Predicted "
        f"{predicted['environment']['date']} on a CPU-only host with torch "
        f"{predicted['environment']['torch']}: `trainfit.distributed.rank_memory` (FSDP2) for "
        "the `h200` row: the single-GPU trace with each rank's share of the states, plus "
        "FSDP2's gathered root unit and two blocks, the unsharded gradients of the root and of "
        "one block, and NCCL's buffers.",
        "",
        "The predictions were revised after these runs and the 2 x H100 ones "
        "(multigpu_h100.md), with two mechanisms found there: the FSDP2 step is traced in pure "
        "bf16 (MixedPrecisionPolicy casts the parameters and runs without autocast, so "
        "layer_norm, softmax and pow save bf16 activations), and FSDP2's sharded gradients "
        "(allocated on the reduce-scatter stream, a pool of their own) are counted beside the "
        "replay. Before the revision: gpt2-medium +6.3% / -3.8% / +3.3%, qwen2-0.5b +8.2% / "
        "+3.6% / +6.2%, tinyllama-1.1b +1.9% / -1.6% / -0.2%, llama-3.2-1b -12.0% / -3.3% / "
        "-4.7% (offload / 2 GPUs / 1 GPU).",
        "",
        "| case | run | measured GB | predicted GB | error |",
        "|---|---|---:|---:|---:|",
    ]
    errors: dict[str, list[float]] = {run: [] for run, _, _ in RUNS}
    for case, shares in predicted["cases"].items():
        for run, share, words in RUNS:
            record = runs.get(f"{case}__{run}")
            if record is None:
                continue
            used = max(r["device_used_bytes"] for r in record["ranks"])
            guess = shares[share]
            error = guess / used - 1
            errors[run].append(error)
            lines.append(
                f"| {case} | {words} | {used / GB:.2f} | {guess / GB:.2f} | {error:+.1%} |"
            )
    lines += ["", "| run | median error | worst |", "|---|---:|---:|"]
    for run, _, words in RUNS:
        if errors[run]:
            worst = min(errors[run], key=lambda e: -abs(e))
            lines.append(f"| {words} | {statistics.median(errors[run]):+.1%} | {worst:+.1%} |")
    every = [e for errs in errors.values() for e in errs]
    under = sum(e < 0 for e in every)
    lines += [
        "",
        f"{under} of {len(every)} predictions are under the measurement; the largest over is "
        f"{max(every):+.1%}. qwen2-0.5b's 2-GPU row got worse with the revision: its pure-bf16 "
        "replay leaves 1.3 GB between reserved and allocated (the autocast replay 0.1 GB), more "
        "than the run's 1.6 GB over all its pools. The NCCL constant was read off these runs "
        "(after-init minus before-init memory), so it is fitted here. FSDP2's own memory "
        "(gathered bf16 units and "
        "unsharded gradients, `trainfit.distributed.memory.engine_bytes`) is counted from the "
        "units' sizes, not fitted. The earlier model without it (`trainfit.plan.beyond_one_gpu`) "
        "had a median of -5.6% and a worst of -11.6% on the 2-GPU rows, -32.0% on the offload "
        "rows. The largest miss left is Llama 3.2's offloaded step (128k vocabulary): what "
        "FSDP2 stages on the GPU for the host's copies is not modelled.",
        "",
    ]
    (RESULTS / "sharded_h200.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
