"""Replay the first iteration's forward/backward passes as the steady iteration's.

Forward and backward of a micro-batch run the same ops on the same shapes in every iteration:
only the optimizer step differs (the first creates its state). Tracing an op under
FakeTensorMode costs ~0.1 ms on a laptop core, so the steady iteration re-emits the recorded
events of the first iteration's passes (with fresh storage keys) and hands the optimizer the
gradients those passes left, as fake tensors with the recorded layout; only the optimizer step
is traced again. This halves the time of an estimate.

A pass can be replayed only when everything it leaves alive is a gradient and everything it
frees was allocated by this iteration's passes. Anything else (a module that caches a tensor on
its first call, GradScaler's lazily created scale, a user step that keeps outputs) makes the
tracer run the steady iteration in full, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import torch
from torch import nn

from trainfit.models.program import Batch
from trainfit.trace.recorder import Event, Recorder, Thread
from trainfit.training import MicroBatchPass, Phase, StepRig, forward_backward

MarkFn = Callable[[Phase], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class _GradLayout:
    """Where one parameter's gradient lives after a pass: its storage key and view."""

    key: int
    storage_bytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int


@dataclass(frozen=True, kw_only=True, slots=True)
class _Pass:
    start: int
    end: int
    grads: tuple[_GradLayout | None, ...]
    """Per trainable parameter, in order (None: no gradient after the pass)."""
    untracked_grad: bool
    """A gradient whose storage the recorder does not know (not replayable)."""
    workspaces: tuple[tuple[int, Thread], ...] = ()
    """Library workspaces the pass created: (position from `start`, thread)."""


RecordedPass = _Pass
"""A first-iteration pass of a finished trace: events[start:end] and the gradients it left."""


class Unreplayable(str, Enum):
    """Why the recorded passes cannot be replayed."""

    NO_PASS = "no pass"
    """No pass was recorded."""
    UNTRACKED_GRAD = "untracked gradient"
    """A gradient's storage was not recorded."""
    FREES_EARLIER = "frees earlier storage"
    """A pass frees storage made before it (`NoReplay.key`)."""
    KEEPS_TENSORS = "keeps tensors"
    """A pass keeps tensors other than gradients, made by `NoReplay.ops`."""
    MIXED_DTYPES = "mixed dtypes"
    """Gradients of different dtypes share a storage."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NoReplay:
    """Why the recorded passes cannot be replayed, with what the reason names."""

    why: Unreplayable
    key: int | None = None
    """The storage freed (`Unreplayable.FREES_EARLIER`)."""
    ops: tuple[str, ...] = ()
    """The ops that made the tensors kept (`Unreplayable.KEEPS_TENSORS`)."""


class PassReuse:
    """Records the first iteration's micro-batch passes and replays them later."""

    def __init__(
        self,
        recorder: Recorder,
        rig: StepRig,
        batch: Batch,
        mark: MarkFn,
        trainable: list[nn.Parameter],
    ) -> None:
        self._recorder = recorder
        self._rig = rig
        self._batch = batch
        self._mark = mark
        self._trainable = trainable
        self._passes: list[_Pass] = []
        self._why_not: NoReplay | None = None

    # -- the first iteration ----------------------------------------------------------------

    def recording(self) -> MicroBatchPass:
        """The pass to run in the first iteration: the real one, recorded."""

        def run(index: int) -> None:
            start = len(self._recorder.events)
            made = len(self._recorder.workspaces)
            forward_backward(self._rig, self._batch, self._mark)
            self._record(start, made)

        return run

    def _record(self, start: int, made: int) -> None:
        grads = self._grad_layouts()
        untracked = any(
            p.grad is not None and g is None for p, g in zip(self._trainable, grads, strict=True)
        )
        self._passes.append(
            _Pass(
                start=start,
                end=len(self._recorder.events),
                grads=grads,
                untracked_grad=untracked,
                workspaces=tuple(
                    (w.index - start, w.thread) for w in self._recorder.workspaces[made:]
                ),
            )
        )

    def copying(self, events: list[Event], passes: tuple[RecordedPass, ...]) -> MicroBatchPass:
        """The pass to run in the first iteration instead of the real one: the passes of a
        trace of the same step with another optimizer, re-emitted (the forward and backward
        passes do not depend on the optimizer) and recorded for the later iterations."""
        emit = self._emitter()

        def run(index: int) -> None:
            start = len(self._recorder.events)
            made = len(self._recorder.workspaces)
            emit(events, passes[index], True)
            self._record(start, made)

        return run

    def exported(self) -> tuple[RecordedPass, ...]:
        """The first iteration's passes, for `copying` in another trace (none when they
        cannot be replayed)."""
        return tuple(self._passes) if self.why_not() is None else ()

    def _grad_layouts(self) -> tuple[_GradLayout | None, ...]:
        layouts: list[_GradLayout | None] = []
        for p in self._trainable:
            grad = p.grad
            key = self._recorder.key_of(grad) if grad is not None else None
            if grad is None or key is None:
                layouts.append(None)
                continue
            layouts.append(
                _GradLayout(
                    key=key,
                    storage_bytes=grad.untyped_storage().nbytes(),
                    dtype=grad.dtype,
                    shape=tuple(grad.shape),
                    stride=tuple(grad.stride()),
                    offset=grad.storage_offset(),
                )
            )
        return tuple(layouts)

    def why_not(self) -> NoReplay | None:
        """Why the recorded passes cannot be replayed, or None when they can."""
        if self._why_not is None and self._passes:
            self._why_not = self._check()
        return self._why_not if self._passes else NoReplay(why=Unreplayable.NO_PASS)

    def _check(self) -> NoReplay | None:
        events = self._recorder.events
        earlier: set[int] = set()  # keys allocated by this iteration's earlier passes
        for item in self._passes:
            if item.untracked_grad:
                return NoReplay(why=Unreplayable.UNTRACKED_GRAD)
            allocated: set[int] = set()
            for event in events[item.start : item.end]:
                if event.alloc:
                    allocated.add(event.key)
                elif event.key in allocated:
                    allocated.discard(event.key)
                elif event.key in earlier:
                    earlier.discard(event.key)
                else:
                    return NoReplay(why=Unreplayable.FREES_EARLIER, key=event.key)
            grad_keys = {g.key for g in item.grads if g is not None}
            survivors = allocated - grad_keys
            if survivors:
                ops = sorted({e.op for e in events[item.start : item.end] if e.key in survivors})
                return NoReplay(why=Unreplayable.KEEPS_TENSORS, ops=tuple(ops))
            earlier |= allocated
            for layouts in _by_key(item.grads).values():
                if len({g.dtype for g in layouts}) > 1:
                    return NoReplay(why=Unreplayable.MIXED_DTYPES)
        return None

    # -- later iterations -------------------------------------------------------------------

    def replaying(self) -> MicroBatchPass:
        """The pass to run in a later iteration: the recorded events, re-emitted."""
        emit = self._emitter()

        def run(index: int) -> None:
            emit(self._recorder.events, self._passes[index], False)

        return run

    def _emitter(self) -> Callable[[list[Event], _Pass, bool], None]:
        """Re-emits a pass's events with fresh keys (one key map per iteration: a pass may free
        what an earlier pass of the iteration made) and installs the gradients it left; with
        `workspaces`, the library workspaces the pass created too (a first iteration)."""
        mapped: dict[int, int] = {}
        recorder = self._recorder

        def emit(events: list[Event], item: _Pass, workspaces: bool) -> None:
            created = dict(item.workspaces) if workspaces else {}
            for offset, event in enumerate(events[item.start : item.end]):
                if offset in created:
                    recorder.workspace_created(created.pop(offset))
                if event.phase is not recorder.phase:
                    self._mark(event.phase)
                if event.alloc:
                    mapped[event.key] = recorder.new_key()
                    key = mapped[event.key]
                else:
                    key = mapped.pop(event.key)
                    recorder.disown(key)
                recorder.events.append(
                    Event(
                        key=key,
                        nbytes=event.nbytes,
                        alloc=event.alloc,
                        phase=event.phase,
                        iteration=recorder.iteration,
                        op=event.op,
                    )
                )
            for thread in created.values():  # made after the pass's last event
                recorder.workspace_created(thread)
            self._install_grads(item, mapped)

        return emit

    def _install_grads(self, item: _Pass, mapped: dict[int, int]) -> None:
        recorder = self._recorder
        bases: dict[int, torch.Tensor] = {}
        for key, layouts in _by_key(item.grads).items():
            new_key = mapped[key]
            current = [
                p.grad
                for p, g in zip(self._trainable, item.grads, strict=True)
                if g is not None and g.key == key and p.grad is not None
            ]
            if current and all(recorder.key_of(t) == new_key for t in current):
                continue  # accumulated in place: the gradients are already there
            dtype = layouts[0].dtype
            numel = layouts[0].storage_bytes // dtype.itemsize
            with recorder.silent(), torch.no_grad():
                base = torch.empty(numel, dtype=dtype)
            recorder.adopt(base, new_key)
            bases[key] = base
        for p, layout in zip(self._trainable, item.grads, strict=True):
            if layout is None:
                p.grad = None
            elif layout.key in bases:
                with recorder.silent(), torch.no_grad():
                    p.grad = bases[layout.key].as_strided(
                        layout.shape, layout.stride, layout.offset
                    )


def _by_key(grads: tuple[_GradLayout | None, ...]) -> dict[int, list[_GradLayout]]:
    groups: dict[int, list[_GradLayout]] = {}
    for layout in grads:
        if layout is not None:
            groups.setdefault(layout.key, []).append(layout)
    return groups
