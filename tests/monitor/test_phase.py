"""`trainfit.monitor.phase`: the phase hooks leave results alone and follow the step (CPU)."""

from __future__ import annotations

import torch

from tests.monitor.support import Net, quiet, train
from trainfit.monitor import StepPhase


def test_hooks_do_not_change_results_and_are_removed() -> None:
    plain, watched = Net(), Net()
    with quiet(model=watched) as mon:
        assert watched.blocks[0].fc._forward_pre_hooks
        losses = train(watched, mon, steps=3)
    assert losses == train(plain, None, steps=3)
    for a, b in zip(plain.parameters(), watched.parameters(), strict=True):
        assert torch.equal(a, b)
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in watched.modules())


def test_hooks_keep_gradients() -> None:
    plain, watched = Net(), Net()
    x = torch.randn(4, 8)
    plain(x).sum().backward()
    with quiet(model=watched):
        watched(x).sum().backward()
    for a, b in zip(plain.parameters(), watched.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad)


def test_phases_follow_the_step() -> None:
    model = Net()
    seen: list[tuple[StepPhase, str | None]] = []
    with quiet(model=model) as mon:
        tracker = mon.tracker
        model.head.register_forward_pre_hook(
            lambda m, a: seen.append((tracker.phase, tracker.module))
        )
        out = model(torch.randn(2, 8))
        seen.append((tracker.phase, tracker.module))
        out.sum().backward()
        seen.append((tracker.phase, tracker.module))
    assert seen == [
        (StepPhase.FORWARD, "head"),
        (StepPhase.LOSS, None),
        (StepPhase.DATA, None),  # NB: the end-of-backward callback ran
    ]
