"""Memory as a function of the micro-batch: synthesised traces equal real ones."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from trainfit import TrainSpec, estimate
from trainfit.errors import SpecError
from trainfit.estimator.scaling import NotALine, max_micro_batch, scale_batch

ZOO = "trainfit.models.zoo"
MELODY = TrainSpec(
    model=f"{ZOO}:melody_transformer", batch=1, seq_len=128, precision="bf16", device="rtx-4060"
)
VQ = TrainSpec(model=f"{ZOO}:vq_patch_autoencoder", batch=1, multiplier=4, device="rtx-4060")


@pytest.fixture(scope="module")
def melody_scaling():
    return scale_batch(MELODY)


@pytest.mark.slow
def test_transformer_allocations_are_affine_in_the_batch(melody_scaling) -> None:
    assert melody_scaling.affine, melody_scaling.why_not
    assert any(melody_scaling.per_sample) and not all(melody_scaling.per_sample)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 4, 9])
def test_replayed_batches_equal_full_estimates(melody_scaling, batch: int) -> None:
    full = estimate(dataclasses.replace(MELODY, batch=batch))
    assert melody_scaling.needed_bytes(batch) == full.device_memory_needed_bytes


@pytest.mark.slow
def test_conv_workspaces_scale_too() -> None:
    scaling = scale_batch(VQ)
    assert scaling.affine, scaling.why_not
    full = estimate(dataclasses.replace(VQ, batch=6))
    assert scaling.needed_bytes(6) == full.device_memory_needed_bytes


@pytest.mark.slow
def test_max_micro_batch_is_the_boundary(melody_scaling) -> None:
    found = max_micro_batch(MELODY, margin=0.1, scaling=melody_scaling)
    assert found.exact and found.batch > 1
    budget = int(0.9 * melody_scaling.device.memory_bytes)
    assert found.budget_bytes == budget
    assert melody_scaling.fits(found.batch, budget)
    assert not melody_scaling.fits(found.batch + 1, budget)
    over = estimate(dataclasses.replace(MELODY, batch=found.batch + 1)).device_memory_needed_bytes
    assert found.next_needed_bytes == over > budget


@pytest.mark.slow
def test_searches_reuse_what_earlier_ones_found() -> None:
    # a search inside a smaller limit, at other margins, then the full search: the answers
    # are those of searches on fresh scalings
    shared = scale_batch(MELODY)
    fresh = dataclasses.replace(shared, memo={})
    for margin, limit in [(0.1, 5), (0.5, 1 << 16), (0.3, 40), (0.1, 1 << 16), (0.5, 3)]:
        reused = max_micro_batch(MELODY, margin=margin, limit=limit, scaling=shared)
        alone = max_micro_batch(
            MELODY, margin=margin, limit=limit, scaling=dataclasses.replace(fresh, memo={})
        )
        assert (reused.batch, reused.needed_bytes) == (alone.batch, alone.needed_bytes)


def test_non_affine_workspace_falls_back_to_tracing_each_batch() -> None:
    # the cuDNN LSTM workspace is a fitted power law in the batch, not a line
    spec = TrainSpec(model=f"{ZOO}:melody_lstm", batch=1, device="rtx-4060")
    scaling = scale_batch(spec)
    assert not scaling.affine
    assert isinstance(scaling.why_not, NotALine) and scaling.why_not.op == "cudnn:workspace"
    assert (
        scaling.needed_bytes(7)
        == estimate(dataclasses.replace(spec, batch=7)).device_memory_needed_bytes
    )


def test_bad_margin_and_target() -> None:
    with pytest.raises(SpecError, match=r"margin must be a fraction in \[0, 1\), got 1.5"):
        max_micro_batch(MELODY, margin=1.5)
    with pytest.raises(SpecError, match=r"the batch search covers GPUs only"):
        scale_batch(dataclasses.replace(MELODY, device="cpu"))


@pytest.mark.parametrize("limit", [1, 7, 64, 1 << 16])
@pytest.mark.parametrize(
    ("base", "slope", "bump"),
    [
        (100, 10, 0),
        (100, 0, 0),
        (5_000, 7, 3),
        (900, 1, 50),
        (100, 3_000, 0),
        (9_000, 1, -1),  # convex: a flat peak (optimizer step) until a steep one takes over
    ],
)
def test_search_finds_the_boundary_of_a_monotone_curve(
    limit: int, base: int, slope: int, bump: int
) -> None:
    # a near-linear curve with allocator-like steps every 5 samples; budget 10_000 bytes
    def needed(batch: int) -> int:
        if bump < 0:
            return max(base + slope * batch, 150 * batch)
        return base + slope * batch + bump * (batch // 5)

    budget = 10_000
    tried: list[int] = []

    def fits(batch: int, budget: int) -> bool:
        tried.append(batch)
        return needed(batch) <= budget

    fake = SimpleNamespace(
        device=SimpleNamespace(memory_bytes=budget, name="fake"),
        affine=True,
        needed_bytes=needed,
        fits=fits,
        bracket=lambda budget, limit: (1, None),
        found=lambda budget, fit, not_fit: None,
    )
    found = max_micro_batch(TrainSpec(model="gpt2"), scaling=fake, limit=limit)  # type: ignore[arg-type]
    fitting = [b for b in range(1, limit + 1) if needed(b) <= budget]
    assert found.batch == (max(fitting) if fitting else 0)
    # the search replays a few batches, not a bisection of the whole range
    assert len(set(tried)) <= 12


def test_max_micro_batch_takes_a_trainspec() -> None:
    from trainfit.errors import SpecError
    from trainfit.estimator.scaling import max_micro_batch

    with pytest.raises(SpecError, match=r"max_micro_batch: spec must be a TrainSpec, got str"):
        max_micro_batch("gpt2")  # type: ignore[arg-type]


def test_max_micro_batch_takes_a_live_module_with_its_sample() -> None:
    import torch
    from torch import nn

    net = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10))
    sample = (torch.randn(4, 4096), torch.randint(0, 10, (4,)))
    found = max_micro_batch(
        model=net, sample=sample, loss=nn.functional.cross_entropy, device="rtx-4060", limit=64
    )
    assert found.device_name == "rtx-4060" and found.batch == 64
    assert net.training and next(net.parameters()).device.type == "cpu"  # the module untouched
    with pytest.raises(SpecError, match="give either a TrainSpec or keyword arguments"):
        max_micro_batch(TrainSpec(model="gpt2"), sample=sample)
