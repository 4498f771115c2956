"""One answer to "how many GPUs would hold it": a does-not-fit GPU's verdict takes its
sharded/offloaded sentence from the multi-GPU plan (`trainfit.distributed`), and the
multi-GPU plan shards a DPO reference model block by block like the policy.

Regression: seed 003's 14B DPO report said both "it would fit 8 of these GPUs with the model
states sharded" (the single-GPU plan's estimate) and "no multi-GPU plan (fsdp2, 8 GPUs) holds
one sample per GPU" (the distributed planner, which counted the whole reference model as one
gathered root unit).
"""

from __future__ import annotations

import re

import pytest

from trainfit.distributed import Strategy, units
from trainfit.plan.options import Verdict
from trainfit.plan.search import plan
from trainfit.plan.words import multi_gpu_text, note_text
from trainfit.spec import TrainSpec

# a 1.5B model: its states do not fit one 8 GB RTX 4060 even with 8-bit AdamW
SPEC = TrainSpec(model="qwen2-1.5b", seq_len=128, precision="bf16")


def _counts(note: str) -> list[int]:
    return [int(n) for n in re.findall(r"fit (\d+) of these GPUs", note)]


def test_a_dpo_reference_is_sharded_block_by_block() -> None:
    plain = TrainSpec(model="gpt2", seq_len=128, precision="bf16")
    dpo = TrainSpec(model="gpt2", seq_len=128, precision="bf16", preference="dpo")
    one, two = units(plain), units(dpo)
    assert two.total == 2 * one.total and two.trainable == one.trainable
    assert two.blocks == 2 * one.blocks and two.largest_block == one.largest_block
    # the reference's embeddings are its only parameters outside the blocks: a unit of their
    # own (gathered for the reference's forward and freed), not part of the policy's root
    assert two.root == one.root and one.reference_root == 0
    assert two.reference_root == one.root and two.reference == one.total


@pytest.fixture(scope="module")
def planned():
    return plan(SPEC, 16, ("rtx-4060",), ladder=False)


@pytest.mark.slow
def test_the_verdict_and_the_multi_gpu_plan_name_the_same_gpu_count(planned) -> None:
    (d,) = planned.devices
    assert d.verdict is Verdict.NO
    assert d.distributed is not None and d.distributed.gpus > 1
    note = note_text(d)
    assert _counts(note) == [d.distributed.gpus], note
    assert "the multi-GPU plan" in note
    assert d.sharded is not None and d.sharded.gpus == d.distributed.gpus
    assert d.sharded.per_gpu_bytes == d.distributed.memory.total_bytes
    # the one-GPU offload alternative is the multi-GPU plan's too
    alternative = d.distributed.fewer_with_offload
    if alternative is not None and alternative.gpus == 1:
        assert d.offloaded is not None
        assert d.offloaded.gpu_bytes == alternative.memory.total_bytes
    else:
        assert d.offloaded is None


@pytest.mark.slow
def test_when_no_multi_gpu_plan_holds_it_the_verdict_says_so() -> None:
    (d,) = plan(SPEC, 16, ("rtx-4060",), ladder=False, strategy=Strategy.FSDP2, gpus=2).devices
    assert d.verdict is Verdict.NO and d.distributed is None
    note = note_text(d)
    assert _counts(note) == [] and d.sharded is None and d.offloaded is None
    assert multi_gpu_text(d.no_multi_gpu) in note
