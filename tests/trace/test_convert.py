"""A step function that casts the model (`model.to(dtype)`) traces, tied weights included."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.spec import TrainSpec
from trainfit.trace.convert import conversions_in_place
from trainfit.trace.step import Category, trace_step


def cast_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """A user's step that puts the model in bf16 before each forward."""
    model.to(torch.bfloat16)
    return model(**batch).loss


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight
        self.norm = nn.LayerNorm(4)


def test_torch_alone_cannot_cast_a_tied_fake_model() -> None:
    # the failure the tracer works around: if PyTorch fixes it, conversions_in_place can go
    with FakeTensorMode(), pytest.raises(RuntimeError, match="Couldn't swap"):
        _Tied().to(torch.bfloat16)


def test_a_tied_fake_model_casts_in_place() -> None:
    with FakeTensorMode(), conversions_in_place():
        model = _Tied()
        weight = model.embed.weight
        weight.grad = torch.zeros_like(weight)
        model.to(torch.bfloat16)
        model.bfloat16()  # a no-op conversion of every parameter
        assert model.embed.weight is weight and model.head.weight is weight
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
        assert weight.grad is not None and weight.grad.dtype == torch.bfloat16
        model.float()
        assert model.norm.weight.dtype == torch.float32
    assert nn.Module._apply.__name__ == "_apply"  # restored after the block


@pytest.fixture(scope="module")
def tied_gpt2(tmp_path_factory: pytest.TempPathFactory) -> str:
    transformers = pytest.importorskip("transformers")
    where = tmp_path_factory.mktemp("tiny-gpt2-tied")
    transformers.GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=2,
        vocab_size=1000,
        n_positions=128,
        bos_token_id=0,
        eos_token_id=0,
    ).save_pretrained(where)
    return str(where)


def test_a_step_function_that_casts_a_tied_model_traces(tied_gpt2: str) -> None:
    spec = TrainSpec(
        model=tied_gpt2, batch=2, seq_len=32, step_fn="tests.trace.test_convert:cast_step"
    )
    trace = trace_step(spec)
    assert trace.dtypes is not None
    assert (trace.dtypes.weights, trace.dtypes.gradients) == ("bf16", "bf16")
    params = {k for k, c in trace.categories.items() if c is Category.PARAMETERS}
    loaded = {e.key: e.nbytes for e in trace.events if e.alloc and e.op == "model.to(device)"}
    copies = {e.key: e.nbytes for e in trace.events if e.alloc and e.key in params} - loaded.keys()
    # the fp32 weights as loaded, then their bf16 copies (the tie counted once in each)
    fp32 = sum(p.numel() for p in _gpt2_params(tied_gpt2)) * 4
    assert sum(loaded.values()) == fp32
    sizes = {e.key: e.nbytes for e in trace.events if e.alloc}
    assert sum(sizes[k] for k in copies) == fp32 // 2


def _gpt2_params(where: str) -> list[nn.Parameter]:
    import transformers

    config = transformers.AutoConfig.from_pretrained(where)
    with torch.device("meta"):
        return list(transformers.AutoModelForCausalLM.from_config(config).parameters())
