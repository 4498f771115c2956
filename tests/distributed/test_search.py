"""The multi-GPU search's traces: made once for GPUs of one kernel family, and the same plan as
when each GPU traces its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers

from trainfit.distributed import search
from trainfit.distributed.search import SharedTraces, plan_distributed
from trainfit.distributed.strategy import Strategy
from trainfit.hardware.catalog import get_device
from trainfit.spec import TrainSpec


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = Path(tmp_path_factory.mktemp("tiny")) / "gpt2"
    transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=512).save_pretrained(folder)
    return str(folder)


def test_gpus_of_one_kernel_family_share_traces(
    tiny_gpt2: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    traced: list[TrainSpec] = []
    real = search.trace_step

    def counting(spec: TrainSpec, **kwargs: object):  # type: ignore[no-untyped-def]
        traced.append(spec)
        return real(spec, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(search, "trace_step", counting)
    spec = TrainSpec(model=tiny_gpt2, seq_len=64, precision="bf16")
    alone = {}
    for name in ("l4", "rtx-4090"):  # NB: both sm89
        alone[name] = plan_distributed(spec, 8, get_device(name), strategy=Strategy.FSDP2, gpus=2)
    per_gpu = len(traced)
    assert per_gpu >= 2
    traced.clear()
    shared = SharedTraces()
    for name in ("l4", "rtx-4090"):
        found = plan_distributed(
            spec, 8, get_device(name), strategy=Strategy.FSDP2, gpus=2, shared=shared
        )
        assert found == alone[name]
    assert len(traced) == per_gpu // 2  # NB: the second GPU traced nothing
