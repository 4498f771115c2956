"""What a long computation is doing, told to whoever shows it: the progress protocol.

The library never prints. A computation that can take more than a moment tells the reporter
in effect an `Event` as each part starts: each model of a spec file, each stage of a staged
plan, each device of a plan, each rung of the low-memory ladder, each traced step, each part
of a report, and each part of a real run (`Activity`: building, each step, each attempt). A
`Reporter` is any callable taking an `Event`; the command line's shows a status line with
rich on a terminal (`trainfit.cli.progress`).

A reporter is put in effect for a block with `reporting(reporter)` (a context variable, so that
the layers that trace, deep under a plan, need no extra parameter); `plan`, `run_plan` and
`run_plan_file` also take one as `progress=`. With none in effect, `tell` does nothing.

Known limitations: a plan's worker process (`jobs` above 1) reports nothing of its own traces;
the main process goes on reporting its devices meanwhile.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class Part(str, Enum):
    """What kind of part an event starts, outermost first: an event of one kind ends the parts
    of the kinds after it (a new device ends the last device's rung and trace)."""

    MODEL = "model"
    """A model of a spec file (`name`: the spec file's name for it)."""
    STAGE = "stage"
    """A stage of a staged plan (`name`: its epochs and what it freezes)."""
    DEVICE = "device"
    """A device planned (`name`: the catalog name)."""
    RUNG = "rung"
    """A rung of the low-memory ladder (`name`: the change, `trainfit.plan.options.Change`)."""
    MEASURE = "measure"
    """A part of a real run on this machine (`name`: an `Activity` value; `index`/`total`:
    the step; `batch`: the micro-batch tried or timed)."""
    TRACE = "trace"
    """A training step traced (`name`: the model, `batch`: the micro-batch)."""
    REPORT = "report"
    """A part of a report built or written (`name`: the part)."""


PARTS: tuple[Part, ...] = tuple(Part)
"""The kinds of part, outermost first."""


class Activity(str, Enum):
    """What a real run (`trainfit measure`) is doing: the `name` of a `Part.MEASURE` event."""

    IMPORT = "import"
    """Loading PyTorch and finding the local device."""
    ESTIMATE = "estimate"
    """Estimating the step beside which the run is measured (traces follow)."""
    PREDICT = "predict"
    """Predicting the largest micro-batch the search starts from (traces follow)."""
    BUILD = "build"
    """Building the model and its batch on the device."""
    WARMUP = "warmup"
    """An untimed warm-up step (`index` of `total` steps)."""
    STEP = "step"
    """A timed step (`index` of `total` steps)."""
    LOOP = "loop"
    """The loop window: `total` steps back to back, timed together."""
    ATTEMPT = "attempt"
    """Training steps at a micro-batch (`batch`) of the largest-micro-batch search."""
    EVALUATE = "evaluate"
    """An evaluation pass at a batch (`batch`) of the search."""
    LATENCY = "latency"
    """Timed forwards at a batch (`batch`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """A part of a computation starts."""

    part: Part
    """What kind of part."""
    name: str
    """Which one (see `Part`)."""
    index: int | None = None
    """Its position among `total` parts of its kind, from 1; None when not counted."""
    total: int | None = None
    """How many parts of its kind there are; None when not known."""
    batch: int | None = None
    """The micro-batch of a traced step; None for the other parts."""


class Reporter(Protocol):
    """Told each `Event` as it happens; must return quickly and never raise."""

    def __call__(self, event: Event, /) -> None: ...


_REPORTER: ContextVar[Reporter | None] = ContextVar("trainfit_progress", default=None)


@contextlib.contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Put `reporter` in effect for the block (None leaves the one in effect)."""
    if reporter is None:
        yield
        return
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


def tell(
    part: Part,
    name: str,
    *,
    index: int | None = None,
    total: int | None = None,
    batch: int | None = None,
) -> None:
    """Tell the reporter in effect that a part starts (nothing when none is)."""
    reporter = _REPORTER.get()
    if reporter is not None:
        reporter(Event(part=part, name=name, index=index, total=total, batch=batch))
