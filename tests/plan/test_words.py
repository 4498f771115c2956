"""A multi-GPU plan's collectives and per-rank memory in words and as JSON (exact strings)."""

from __future__ import annotations

from trainfit.distributed.comm import Collectives, CommTime
from trainfit.distributed.memory import RankMemory
from trainfit.distributed.strategy import Offload, Strategy
from trainfit.plan.words import comm_dict, rank_memory_dict, rank_memory_label


def _memory(strategy: Strategy) -> RankMemory:
    return RankMemory(
        strategy=strategy, offload=Offload.NONE, gpus=4, nodes=1, micro_batch=2,
        total_bytes=100, peak_allocated_bytes=90, parameters_bytes=10, gradients_bytes=20,
        optimizer_state_bytes=30, activations_bytes=5, other_bytes=6, engine_bytes=7,
        nccl_bytes=8, context_bytes=9, host_bytes_per_node=0,
    )  # fmt: skip


def test_the_collectives_assumed_in_words() -> None:
    def said(collectives: Collectives) -> object:
        comm = CommTime(
            seconds=0.1234567, exposed_seconds=0.01, bytes_per_gpu=3, intra_gbs=450.0,
            inter_gbs=None, collectives=collectives,
        )  # fmt: skip
        data = comm_dict(comm)
        assert (data["seconds"], data["label"]) == (0.123457, "modelled")
        return data["assumption"]

    assert said(Collectives.NONE) == "one GPU: no collectives"
    assert said(Collectives.ALL_REDUCE) == (
        "gradient all-reduce once per optimizer step, none hidden (measured on 2 x H200 for DDP)"
    )
    assert said(Collectives.GATHERED) == (
        "all-gathers and reduce-scatters every micro-batch; up to 80% of forward + backward "
        "compute hides them (assumed, not measured)"
    )


def test_a_ranks_memory_is_modelled_and_deepspeeds_not_run() -> None:
    assert rank_memory_label(_memory(Strategy.FSDP2)) == "modelled"
    assert rank_memory_label(_memory(Strategy.ZERO3)) == "modelled, DeepSpeed not run"
    data = rank_memory_dict(_memory(Strategy.ZERO3))
    assert (data["strategy"], data["per_rank_bytes"], data["label"]) == (
        "zero3",
        100,
        "modelled, DeepSpeed not run",
    )
    assert data["breakdown"] == {
        "parameters": 10, "gradients": 20, "optimizer_state": 30, "activations": 5,
        "other": 6, "engine": 7, "nccl": 8, "context": 9,
    }  # fmt: skip
