"""What a real run reads at each phase mark of a step: the memory peaks of each phase, the first
step's activation and gradient bytes, and (optionally) CUDA events that time each phase."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainfit.measure.backend import Backend
from trainfit.training import Phase


def unique_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors`."""
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


@dataclass(frozen=True, kw_only=True, slots=True)
class PhaseMemory:
    """Memory peaks within one phase of one step (warm-up steps counted from 0)."""

    iteration: int
    phase: Phase
    peak_allocated_bytes: int | None
    peak_used_bytes: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class PhaseSeconds:
    """Device time of one timed step's phases: CUDA events at the phase marks, each phase from
    its mark to the next, summed over micro-batches."""

    forward: float
    backward: float
    optimizer: float


class PhaseMarks:
    """What a run reads at each phase mark: the memory peaks since the last mark, the first
    step's activation and gradient bytes, and (`events`) a CUDA event for the phase times."""

    def __init__(self, backend: Backend, trainable: list[nn.Parameter], events: bool) -> None:
        self.backend = backend
        self.trainable = trainable
        self.phase = Phase.SETUP
        self.iteration = 0
        self.phases: list[PhaseMemory] = []
        self.reserved_peaks: list[int] = []
        self.before_forward: int | None = None
        self.activation: int | None = None
        self.grad: int | None = None
        self.events: list[tuple[int, Phase, Any]] | None = [] if events else None

    def __call__(self, phase: Phase) -> None:
        self.stamp(phase)
        backend = self.backend
        allocated, reserved, used = backend.take_peaks()
        if reserved is not None:
            self.reserved_peaks.append(reserved)
        self.phases.append(
            PhaseMemory(
                iteration=self.iteration,
                phase=self.phase,
                peak_allocated_bytes=allocated,
                peak_used_bytes=used,
            )
        )
        first = self.iteration == 0
        if first and self.phase is Phase.FORWARD and phase is Phase.BACKWARD:
            now = backend.allocated()
            if now is not None and self.before_forward is not None:
                self.activation = now - self.before_forward
        if first and phase is Phase.OPTIMIZER:
            self.grad = unique_bytes([p.grad for p in self.trainable if p.grad is not None])
        if phase is Phase.FORWARD and self.phase is not Phase.FORWARD:
            self.before_forward = backend.allocated()
        self.phase = phase

    def enter(self, phase: Phase) -> None:
        """Only note that `phase` starts (a step of the loop window: nothing read, so that
        nothing waits for the device; a failure still names its phase)."""
        self.phase = phase

    def stamp(self, phase: Phase) -> None:
        """With `events`, record a CUDA event now: where the previous phase's device time
        ends and `phase`'s begins (the step's end is stamped before its synchronisation)."""
        if self.events is not None:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.events.append((self.iteration, phase, event))

    def phase_seconds(self, warmup: int) -> tuple[PhaseSeconds, ...]:
        """Per timed step, the device seconds from each phase's mark to the next mark, summed
        over micro-batches (the device synchronised before this is read)."""
        if self.events is None:
            return ()
        totals: dict[int, dict[Phase, float]] = {}
        for (it, phase, begin), (_, _, end) in itertools.pairwise(self.events):
            if it >= warmup and phase is not Phase.SETUP:
                step = totals.setdefault(it, dict.fromkeys(TIMED_PHASES, 0.0))
                step[phase] += begin.elapsed_time(end) / 1000.0
        return tuple(
            PhaseSeconds(forward=t[Phase.FORWARD], backward=t[Phase.BACKWARD],
                         optimizer=t[Phase.OPTIMIZER])
            for _, t in sorted(totals.items())
        )  # fmt: skip


TIMED_PHASES = (Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER)
