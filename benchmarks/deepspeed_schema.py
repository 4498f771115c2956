"""The DeepSpeed configs `trainfit plan --export deepspeed` writes, read by DeepSpeed's own
parser (`deepspeed.runtime.config.DeepSpeedConfig`) and by trainfit's schema check.

DeepSpeed is not a trainfit dependency and is not on the GPU machine; run this where it is
installed (no GPU needed, DS_ACCELERATOR=cpu):

    DS_ACCELERATOR=cpu PYTHONPATH=<deepspeed>:src:. python -m benchmarks.deepspeed_schema

Each strategy and offload (and a config whose batch product is wrong, which both must refuse)
over 16 GPUs on 2 nodes, for gpt2 at 128 tokens on the h100 row. Writes
benchmarks/results/deepspeed_schema.md.
"""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path

from trainfit.distributed import Offload, Strategy, plan_distributed
from trainfit.errors import SpecError
from trainfit.export.deepspeed import check_config, ds_config
from trainfit.hardware.catalog import get_device
from trainfit.spec import TrainSpec

OUT = Path(__file__).parent / "results" / "deepspeed_schema.md"
WORLD = 16


class _DataParallel:
    """The `mpu` DeepSpeedConfig asks for the data-parallel world size."""

    def get_data_parallel_world_size(self) -> int:
        return WORLD


def deepspeed_verdict(config: dict) -> str:
    """ "accepted", or DeepSpeed's error in a line."""
    import deepspeed.runtime.config as ds

    ds.dist.get_rank = lambda: 0  # NB: no process group here; the rank is not used
    try:
        parsed = ds.DeepSpeedConfig(dict(config), mpu=_DataParallel())
    except Exception as exc:  # NB: DeepSpeed raises assertions and pydantic errors
        return f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return (
        f"accepted (stage {parsed.zero_optimization_stage}, batch "
        f"{parsed.train_batch_size} = {parsed.train_micro_batch_size_per_gpu} x "
        f"{parsed.gradient_accumulation_steps} x {WORLD})"
    )


def trainfit_verdict(config: dict) -> str:
    try:
        check_config(config, WORLD)
    except SpecError as exc:
        return f"refused: {exc}"
    return "accepted"


def main() -> None:
    import deepspeed
    import torch

    device = get_device("h100")
    spec = TrainSpec(model="gpt2", seq_len=128, precision="bf16", device="h100")
    base = plan_distributed(spec, 64, device, strategy=Strategy.ZERO3, gpus=WORLD, nodes=2)
    assert base is not None
    rows = []
    combos = [
        (Strategy.DDP, Offload.NONE),
        (Strategy.ZERO1, Offload.NONE),
        (Strategy.ZERO2, Offload.NONE),
        (Strategy.ZERO2, Offload.OPTIMIZER),
        (Strategy.ZERO3, Offload.NONE),
        (Strategy.ZERO3, Offload.OPTIMIZER),
        (Strategy.ZERO3, Offload.PARAMS),
        (Strategy.FSDP2, Offload.PARAMS),
        (Strategy.FSDP2_HYBRID, Offload.NONE),
    ]
    for strategy, offload in combos:
        config = ds_config(spec, dataclasses.replace(base, strategy=strategy, offload=offload))
        rows.append((f"{strategy.value}, offload {offload.value}", config))
    wrong = ds_config(spec, base)
    wrong["train_batch_size"] += 1
    rows.append(("zero3, train_batch_size off by one (must be refused)", wrong))
    unknown = ds_config(spec, base)
    unknown["zero_optimization"]["stage3_prefetch_bucket"] = 1  # type: ignore[index]
    rows.append(("zero3, a misspelt zero_optimization key (must be refused)", unknown))
    lines = [
        "# DeepSpeed configs written by `trainfit plan --export deepspeed`, parsed by DeepSpeed",
        "",
        f"{datetime.date.today().isoformat()}, DeepSpeed {deepspeed.__version__} (installed "
        f"with DS_BUILD_OPS=0, DS_ACCELERATOR=cpu), torch {torch.__version__}, on a CPU-only "
        f"host: `python -m benchmarks.deepspeed_schema`. Each config is gpt2 (128 tokens) "
        f"over {WORLD} GPUs on 2 nodes; DeepSpeed's `DeepSpeedConfig` is given that "
        "data-parallel world size.",
        "",
        "| config | DeepSpeedConfig | trainfit check_config |",
        "|---|---|---|",
    ]
    for name, config in rows:
        lines.append(f"| {name} | {deepspeed_verdict(config)} | {trainfit_verdict(config)} |")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
