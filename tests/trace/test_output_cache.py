"""Ops answered from the recorder's output cache trace exactly as ops dispatched to
FakeTensorMode."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tests.trace.test_reuse import _canonical
from trainfit import TrainSpec
from trainfit.trace import output_cache
from trainfit.trace.step import trace_step

ZOO = "trainfit.models.zoo"

SPECS = {
    "transformer-bf16-ckpt": dict(
        model=f"{ZOO}:melody_transformer",
        batch=2,
        seq_len=64,
        precision="bf16",
        checkpointing=True,
        grad_clip=1.0,
    ),
    "lstm-fp32-sgd": dict(
        model=f"{ZOO}:melody_lstm", batch=4, seq_len=32, optimizer="sgd-momentum"
    ),
    "conv-fp16-accum": dict(model=f"{ZOO}:redimnet_like", batch=2, precision="fp16", grad_accum=2),
    "vq-pure-bf16-adafactor": dict(
        model=f"{ZOO}:vq_patch_autoencoder", batch=2, precision="pure-bf16", optimizer="adafactor"
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_cached_outputs_trace_like_dispatched_ones(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = TrainSpec(**SPECS[name])
    hits: list[int] = []
    real_replay = output_cache.OutputCache.replay

    def counted(self: output_cache.OutputCache, key: tuple[object, ...], args: tuple) -> object:
        out = real_replay(self, key, args)
        if out is not output_cache.MISS:
            hits.append(1)
        return out

    monkeypatch.setattr(output_cache.OutputCache, "replay", counted)
    cached = trace_step(spec)
    monkeypatch.setattr(output_cache.OutputCache, "key", lambda self, func, args, kwargs: None)
    dispatched = trace_step(spec)
    assert len(hits) > 100
    assert _canonical(cached) == _canonical(dispatched)


def _called(cache: output_cache.OutputCache, func: Any, args: tuple[Any, ...]) -> Any:
    """`func(*args)` as the recorder calls it: answered by `cache`, else dispatched and kept."""
    key = cache.key(func, args, {})
    assert key is not None
    out = cache.replay(key, args)
    if out is output_cache.MISS:
        out = func(*args)
        cache.remember(key, out, args, {})
    return out


def test_an_unsafe_view_is_made_over_its_input_storage() -> None:
    # NB: `_unsafe_view` declares no alias but returns a view: made again as a fresh tensor it
    # would be a second allocation
    cache = output_cache.OutputCache()
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.empty(4, 6))
        for _ in range(2):
            out = _called(cache, torch.ops.aten._unsafe_view.default, (x, [24]))
            assert out.untyped_storage() is x.untyped_storage()
            assert out.shape == (24,)
    assert cache.hits == 1


def test_a_memory_format_is_part_of_the_key() -> None:
    # NB: the optimizers' state is made by zeros_like(p, memory_format=preserve_format): a
    # keyword of its own type, keyed by its value as FakeTensorMode's own cache keys it
    cache = output_cache.OutputCache()
    zeros_like = torch.ops.aten.zeros_like.default
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.empty(4, 6).t())
        made = {}
        for memory_format in (torch.preserve_format, torch.contiguous_format) * 2:
            kwargs = {"memory_format": memory_format}
            key = cache.key(zeros_like, (x,), kwargs)
            assert key is not None
            out = cache.replay(key, (x,))
            if out is output_cache.MISS:
                out = zeros_like(x, **kwargs)
                cache.remember(key, out, (x,), kwargs)
            dispatched = zeros_like(x, **kwargs)
            assert (out.shape, out.stride(), out.dtype) == (
                dispatched.shape,
                dispatched.stride(),
                dispatched.dtype,
            )
            assert out.untyped_storage() is not x.untyped_storage()
            made.setdefault(memory_format, out.stride())
    assert made == {torch.preserve_format: (1, 6), torch.contiguous_format: (4, 1)}
    assert cache.hits == 2


@pytest.mark.skipif(
    not output_cache.MADE_AS_FAKE_TENSOR_MODE, reason="not checked on this torch release"
)
@pytest.mark.parametrize(
    "real",
    [
        torch.tensor(0.0),
        torch.tensor(3, dtype=torch.int64),
        torch.tensor([2.5], dtype=torch.float64),
        torch.tensor(True),
    ],
    ids=["float32", "int64", "one-element", "bool"],
)
def test_a_lifted_scalar_is_the_fake_tensor_fake_tensor_mode_makes(real: torch.Tensor) -> None:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        theirs = torch.ops.aten.lift_fresh.default(real)
    mine = output_cache.lifted(mode, real)
    assert type(mine) is type(theirs)
    assert {k: v for k, v in mine.__dict__.items() if k != "constant"} == {
        k: v for k, v in theirs.__dict__.items() if k != "constant"
    }
    for tensor in (mine, theirs):
        assert tensor.constant is not real and torch.equal(tensor.constant, real)
        assert tensor.constant.dtype == real.dtype and tensor.constant.device == real.device
        assert tensor.untyped_storage().device.type == "meta"
    for what in ("shape", "dtype", "device", "requires_grad", "is_leaf"):
        assert getattr(mine, what) == getattr(theirs, what), what
    assert (mine.stride(), mine.storage_offset()) == (theirs.stride(), theirs.storage_offset())
    assert mine.untyped_storage().nbytes() == theirs.untyped_storage().nbytes()
    assert torch._C._dispatch_keys(mine) == torch._C._dispatch_keys(theirs)
    # NB: registered as FakeTensorMode registers its constants, for the invalidation of aliases
    mapping = mode.fake_tensor_converter.constant_storage_mapping
    assert any(ref() is mine for refs in mapping.values() for ref in refs)
    # NB: and kept in the conversion's memos, which ops on constants only read back: an
    # in-place op gives back the same fake tensor, a view one over the same storage
    with mode:
        for tensor in (mine, theirs):
            assert tensor.zero_() is tensor
            view = tensor.view(-1)
            assert view.untyped_storage()._cdata == tensor.untyped_storage()._cdata
            assert view.constant is not None
    assert output_cache.lifted(mode, torch.zeros(3)) is None  # NB: not kept as a constant
    assert output_cache.lifted(mode, theirs) is None  # NB: already fake


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_lifted_scalars_trace_like_dispatched_ones(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainfit.trace import recorder

    spec = TrainSpec(**SPECS[name])
    made: list[int] = []
    real_lifted = recorder.lifted

    def counted(mode: Any, tensor: Any) -> Any:
        out = real_lifted(mode, tensor)
        made.append(out is not None)
        return out

    monkeypatch.setattr(recorder, "lifted", counted)
    fast = trace_step(spec)
    monkeypatch.setattr(recorder, "lifted", lambda mode, tensor: None)
    dispatched = trace_step(spec)
    if "optimizer" not in SPECS[name] and output_cache.MADE_AS_FAKE_TENSOR_MODE:
        assert sum(made) > 0  # NB: AdamW's step counters; SGD and Adafactor lift none
    assert fast == dispatched and fast.costs == dispatched.costs
    assert _canonical(fast) == _canonical(dispatched)


def _data_pointer_raises(tensor: torch.Tensor) -> bool:
    try:
        tensor.data_ptr()
    except RuntimeError:
        return True
    return False


@pytest.mark.parametrize("unsafe", [False, True], ids=["guarded", "unsafe-access"])
@pytest.mark.parametrize("device", ["cuda:0", "cpu"])
def test_a_made_output_is_the_fake_tensor_its_constructor_makes(device: str, unsafe: bool) -> None:
    from torch._functorch import config
    from torch._subclasses.fake_tensor import FakeTensor

    cache = output_cache.OutputCache()
    fake_device = torch.device(device)
    with config.patch(fake_tensor_allow_unsafe_data_ptr_access=unsafe):
        mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        x = mode.from_tensor(torch.empty(4, 6))
        cache.key(torch.ops.aten.add.Tensor, (x, x), {})  # NB: the cache learns its mode

    def meta() -> torch.Tensor:
        with torch._C._DisableTorchDispatch():
            return torch.empty_strided((4, 6), (1, 4), dtype=torch.bfloat16, device="meta")

    first = cache._fake(meta(), fake_device)  # NB: by the constructor, its attributes kept
    made, theirs = cache._fake(meta(), fake_device), FakeTensor(mode, meta(), fake_device)
    for tensor in (first, made):
        assert type(tensor) is FakeTensor
        assert tensor.__dict__ == theirs.__dict__ and tensor.__dict__ is not theirs.__dict__
        assert torch._C._dispatch_keys(tensor) == torch._C._dispatch_keys(theirs)
        assert (tensor.device, tensor.shape, tensor.stride()) == (
            theirs.device,
            theirs.shape,
            theirs.stride(),
        )
        assert tensor.untyped_storage()._cdata != theirs.untyped_storage()._cdata
        if not unsafe:  # NB: else a warning, given once per process
            assert _data_pointer_raises(tensor) and _data_pointer_raises(theirs)
    with mode:
        summed = made @ made.t()
    assert type(summed) is FakeTensor and summed.fake_device == fake_device


def test_a_table_is_shared_within_its_scope_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output_cache, "_TABLES", {})
    scope = ("test", object())
    table = output_cache.shared_entries(scope)
    assert output_cache.shared_entries(scope) is table
    assert output_cache.shared_entries(("test", object())) is not table
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert output_cache.shared_entries(scope) is not table
    finally:
        torch.set_default_dtype(previous)
    first, second, alone = (output_cache.OutputCache(e) for e in (table, table, None))
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.empty(3, 5))
        args = (x, x)
        for cache in (first, second, alone):
            assert _called(cache, torch.ops.aten.add.Tensor, args).shape == (3, 5)
    assert (first.hits, second.hits, alone.hits) == (0, 1, 0)


def test_a_table_past_its_limit_starts_again_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output_cache, "_TABLES", {})
    monkeypatch.setattr(output_cache, "_LIMIT", 2)
    scope = ("test-limit",)
    table = output_cache.shared_entries(scope)
    table.update({(1,): None, (2,): None})
    assert output_cache.shared_entries(scope) is table
    table[(3,)] = None
    again = output_cache.shared_entries(scope)
    assert again is not table and again == {}
    assert output_cache.shared_entries(scope) is again


@pytest.mark.slow
def test_a_trace_after_others_is_the_trace_made_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # NB: outputs remembered by earlier traces of the process (other models, batches, layer
    # counts) make the same trace as dispatching every op; the table starts empty here
    monkeypatch.setattr(output_cache, "_TABLES", {})
    for name in sorted(SPECS):
        trace_step(TrainSpec(**SPECS[name]))
        trace_step(TrainSpec(**{**SPECS[name], "batch": SPECS[name]["batch"] + 1}))
    shared = {name: trace_step(TrainSpec(**SPECS[name])) for name in sorted(SPECS)}
    monkeypatch.setattr(output_cache.OutputCache, "key", lambda self, func, args, kwargs: None)
    for name in sorted(SPECS):
        alone = trace_step(TrainSpec(**SPECS[name]))
        assert shared[name] == alone and shared[name].costs == alone.costs, name
        assert _canonical(shared[name]) == _canonical(alone), name
