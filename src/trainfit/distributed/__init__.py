"""Training over several GPUs: engines, per-rank memory, communication, the GPU-count search
and the launch files (torchrun + FSDP2, DeepSpeed)."""

from trainfit.distributed.comm import CommTime, comm_time
from trainfit.distributed.memory import RankMemory, rank_memory, traced_precision
from trainfit.distributed.search import DistributedPlan, plan_distributed
from trainfit.distributed.strategy import Layout, Offload, Strategy, check_batch
from trainfit.distributed.units import Units, units

__all__ = [
    "CommTime",
    "DistributedPlan",
    "Layout",
    "Offload",
    "RankMemory",
    "Strategy",
    "Units",
    "check_batch",
    "comm_time",
    "plan_distributed",
    "rank_memory",
    "traced_precision",
    "units",
]
