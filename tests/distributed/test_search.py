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


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> list[TrainSpec]:
    """The specs the multi-GPU search traces, in order (its `trace_step` wrapped)."""
    found: list[TrainSpec] = []
    real = search.trace_step

    def counting(spec: TrainSpec, **kwargs: object):  # type: ignore[no-untyped-def]
        found.append(spec)
        return real(spec, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(search, "trace_step", counting)
    return found


def test_gpus_of_one_kernel_family_share_traces(tiny_gpt2: str, traced: list[TrainSpec]) -> None:
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


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = Path(tmp_path_factory.mktemp("tiny")) / "llama"
    transformers.LlamaConfig(
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=2,
        num_key_value_heads=2,
        vocab_size=512,
    ).save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize(
    ("model", "shared_across"),
    [("tiny_llama", True), ("tiny_gpt2", False)],  # NB: GPT-2's dropout: cuDNN's scratch on sm90
)
def test_gpus_of_kernel_families_that_trace_alike_share_traces(
    model: str, shared_across: bool, request: pytest.FixtureRequest, traced: list[TrainSpec]
) -> None:
    spec = TrainSpec(model=request.getfixturevalue(model), seq_len=64, precision="bf16")
    names = ("h100", "a100-80gb")  # NB: sm90 and sm80: other kernel families
    alone = {n: plan_distributed(spec, 8, get_device(n), strategy="fsdp2", gpus=2) for n in names}
    per_gpu = len(traced) // 2
    assert per_gpu >= 2 and len(traced) == 2 * per_gpu
    traced.clear()
    shared = SharedTraces()
    for name in names:
        found = plan_distributed(spec, 8, get_device(name), strategy="fsdp2", gpus=2, shared=shared)
        assert found == alone[name]
    assert len(traced) == (per_gpu if shared_across else 2 * per_gpu)


def test_a_live_module_is_planned_as_its_import_path_is() -> None:
    import torch

    from trainfit.models.zoo import groove_predictor

    named = TrainSpec(model="trainfit.models.zoo:groove_predictor")
    h100 = get_device("h100")
    sample = {"hits": torch.rand(4, 32, 9), "target": torch.rand(4, 32, 18)}
    live = plan_distributed(
        model=groove_predictor(), sample=sample, effective_batch=64, device="h100", gpus=2,
        strategy="ddp",
    )  # fmt: skip
    found = plan_distributed(named, 64, h100, gpus=2, strategy=Strategy.DDP)
    assert live is not None and found is not None
    assert (live.strategy, live.micro_batch, live.grad_accum) == (
        found.strategy, found.micro_batch, found.grad_accum,
    )  # fmt: skip
    assert live.memory.total_bytes == found.memory.total_bytes


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"effective_batch": "8", "device": "h100"},
            "plan_distributed: effective_batch must be an int, got str: samples per optimizer step",
        ),
        (
            {"effective_batch": 8},
            "plan_distributed: device must be a str or Device, got NoneType: a catalog name such "
            "as 'h100'",
        ),
        (
            {"effective_batch": 8, "device": "h100", "gpus": 0, "margin": 1.5},
            "plan_distributed: gpus must be at least 1, got 0; plan_distributed: margin must be a "
            "fraction in [0, 1), got 1.5",
        ),
        (
            {"effective_batch": 8, "device": "h100", "strategy": "fsdp3"},
            "unknown strategy 'fsdp3'; did you mean 'fsdp2'",
        ),
        (
            {"effective_batch": 8, "device": "h100", "batch": 4},
            "unknown plan_distributed argument 'batch'; did you mean 'effective_batch'?",
        ),
    ],
)
def test_a_wrong_argument_is_one_line(kwargs: dict[str, object], message: str) -> None:
    from trainfit.errors import TrainfitError

    spec = None if "batch" in kwargs else TrainSpec(model="trainfit.models.zoo:emotion_mlp")
    model = {"model": "trainfit.models.zoo:emotion_mlp"} if spec is None else {}
    with pytest.raises(TrainfitError) as raised:
        plan_distributed(spec, **model, **kwargs)  # type: ignore[arg-type]
    assert str(raised.value).startswith(message)
