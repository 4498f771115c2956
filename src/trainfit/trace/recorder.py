"""Record every device allocation and free of a traced step, in order.

A `TorchDispatchMode` sits just above FakeTensorMode: each op's new output storages are
allocations; a weakref finaliser on each storage reports its free at the moment the last
reference dies, which is the moment the CUDA caching allocator would get the block back.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    UnsupportedOperatorException,
)
from torch.utils._python_dispatch import TorchDispatchMode

from trainfit.errors import TraceError
from trainfit.trace.costs import (
    SYNC_COST,
    CostLog,
    OpCost,
    foreach_cost,
    foreach_tensors,
    graph_op,
    op_cost,
)
from trainfit.trace.output_cache import MISS, OutputCache, lifted, shared_entries
from trainfit.training import Phase

aten = torch.ops.aten
_DEVICE = torch.ops.prim.device.default
_LIFT = aten.lift_fresh.default
_LABEL: list[str | None] = [None]

LIBRARY_OP = "cudnn:"
"""Prefix of the op name of every allocation cuDNN makes for itself (the breakdown's
workspaces): "cudnn:workspace", "cudnn:dropout_state", "cudnn:attention_dropout_scratch"."""


@contextlib.contextmanager
def labelled(op: str) -> Iterator[None]:
    """Record allocations made in the block under `op` (a library buffer, e.g. "cudnn:...")."""
    _LABEL[0] = op
    try:
        yield
    finally:
        _LABEL[0] = None


class Answer(str, Enum):
    """What a data-dependent value was answered (its value is the Python literal)."""

    TRUE = "True"
    FALSE = "False"
    ONE = "1"
    ONE_FLOAT = "1.0"


@dataclass(frozen=True, kw_only=True, slots=True)
class DataCheck:
    """A value that depends on data (`if mask.all():`), answered as for unpadded random inputs
    on the common path (`Recorder._assume_scalar`)."""

    op: str
    """The op that made the value ("" when not known)."""
    module: str
    """The module whose forward read it ("" for the loss)."""
    answer: Answer


HOST_SCALAR_CREATORS = frozenset(
    {"lift_fresh.default", "lift_fresh_copy.default", "scalar_tensor.default"}
)
"""Ops that make a scalar tensor from a Python number: on a CUDA target it stays on the host
(the optimizers' step counters), so reading it back needs no device sync."""


class Thread(str, Enum):
    """Which host thread would launch the op on CUDA (each owns a cuBLAS handle)."""

    MAIN = "main"
    AUTOGRAD = "autograd"


# Ops that call cuBLAS on CUDA: the first one on each thread creates that thread's workspace.
CUBLAS_OPS = frozenset(
    {
        aten.mm.default,
        aten.addmm.default,
        aten.bmm.default,
        aten.baddbmm.default,
        aten.addbmm.default,
        aten.addmv.default,
        aten.mv.default,
        aten.dot.default,
    }
)


@dataclass(slots=True)
class Event:
    """One allocation (size > 0 at alloc) or free of a storage, in program order."""

    key: int
    """Storage number, unique within a trace."""
    nbytes: int
    """Requested bytes (0 on a free event)."""
    alloc: bool
    phase: Phase
    iteration: int
    op: str
    """The op that allocated (or "free")."""

    def __reduce__(self) -> tuple[type[Event], tuple[int, int, bool, Phase, int, str]]:
        # NB: pickled as its constructor's arguments: a stored trace (`trainfit.trace.store`)
        # holds tens of thousands of events, read back ten times faster than slot by slot
        return Event, (self.key, self.nbytes, self.alloc, self.phase, self.iteration, self.op)


@dataclass(slots=True)
class WorkspaceEvent:
    """A runtime library workspace created at this point of the trace (cuBLAS handle)."""

    index: int
    """Position in the event list before which it is allocated."""
    thread: Thread


class Recorder(TorchDispatchMode):
    """Records allocations of storages created under it, and their frees."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # NB: torch wraps a mode's __torch_dispatch__ in a dynamo-disable guard unless this
        # says no; nothing is compiled inside a trace, and the guard cost 8% of one
        return False

    def __init__(self, scope: tuple[object, ...] | None = None, fake_mode: Any = None) -> None:
        """`scope`: the output cache's entries are shared with the process's other traces of
        this scope (`output_cache.shared_entries`); None keeps them to this trace. `fake_mode`:
        the FakeTensorMode entered just below this mode, when known."""
        super().__init__()
        self.events: list[Event] = []
        self.workspaces: list[WorkspaceEvent] = []
        self.assumptions: list[DataCheck] = []
        self.phase = Phase.SETUP
        self.iteration = 0
        self.module_path = ""
        self._keys: dict[int, int] = {}
        self._ops: dict[int, str] = {}
        self._next = 0
        self._cublas_threads: set[Thread] = set()
        self._finalizers: dict[int, weakref.finalize] = {}
        self._finished = False
        self._silent = False
        self.ops = 0
        self._outputs = OutputCache(None if scope is None else shared_entries(scope))
        self.costs = CostLog()
        self.fake_mode = fake_mode
        """The FakeTensorMode just below this mode, when known: a real scalar lifted under it
        is made here as it would make it (`output_cache.lifted`)."""

    # -- bookkeeping ----------------------------------------------------------------------

    def track(self, tensor: torch.Tensor, op: str) -> int | None:
        """Record `tensor`'s storage as allocated now, unless already known; return its key."""
        storage = tensor.untyped_storage()
        ident = id(storage)
        if ident in self._keys:
            return self._keys[ident]
        if self._silent:
            return None
        key = self.new_key()
        self.events.append(
            Event(
                key=key,
                nbytes=storage.nbytes(),
                alloc=True,
                phase=self.phase,
                iteration=self.iteration,
                op=op,
            )
        )
        self._watch(storage, key)
        if storage.nbytes() <= 8:
            self._ops[key] = op  # only scalars are ever read back as data
        return key

    def charge(self, cost: OpCost) -> None:
        """Count the work of a library call the tracer emulates (cuDNN's LSTM)."""
        if self.phase is not Phase.SETUP:
            self.costs.add(cost, self.iteration, self.phase)

    def workspace_created(self, thread: Thread) -> None:
        """A library workspace is created on `thread` before the next event (a replayed op)."""
        self._cublas_threads.add(thread)
        self.workspaces.append(WorkspaceEvent(index=len(self.events), thread=thread))

    def new_key(self) -> int:
        """A fresh storage key (for events emitted without an op)."""
        key = self._next
        self._next += 1
        return key

    def _watch(self, storage: torch.UntypedStorage, key: int) -> None:
        ident = id(storage)
        self._keys[ident] = key
        self._finalizers[key] = weakref.finalize(storage, self._freed, ident, key)

    @contextlib.contextmanager
    def silent(self) -> Iterator[None]:
        """Create tensors without recording their allocation (they get keys by `adopt`)."""
        self._silent = True
        try:
            yield
        finally:
            self._silent = False

    def adopt(self, tensor: torch.Tensor, key: int) -> None:
        """Let `tensor`'s storage stand for the already recorded allocation `key`."""
        self._watch(tensor.untyped_storage(), key)

    def disown(self, key: int) -> None:
        """Forget `key`'s storage: its free was already recorded; its death records nothing."""
        finalizer = self._finalizers.pop(key, None)
        if finalizer is not None:
            ident = finalizer.peek()[2][0] if finalizer.peek() else None
            finalizer.detach()
            if ident is not None and self._keys.get(ident) == key:
                del self._keys[ident]

    def key_of(self, tensor: torch.Tensor) -> int | None:
        """The key of a tracked tensor's storage, or None."""
        return self._keys.get(id(tensor.untyped_storage()))

    def finish(self) -> None:
        """Stop recording: the trace is complete.

        Storages still alive keep their finalizers otherwise, and one freed later (a reference
        cycle that the garbage collector breaks after the trace) would append a free to
        `events`, which the finished `StepTrace` shares: its events would no longer line up
        with another trace's (a scaling's per-event growth). Their ids are forgotten too, as
        a later object can reuse them.
        """
        for finalizer in self._finalizers.values():
            finalizer.detach()
        self._finalizers.clear()
        self._keys.clear()
        self._finished = True

    def _freed(self, ident: int, key: int) -> None:
        if self._finished:
            return
        if self._keys.get(ident) == key:
            del self._keys[ident]
        self._finalizers.pop(key, None)
        self._ops.pop(key, None)
        self.events.append(
            Event(
                key=key,
                nbytes=0,
                alloc=False,
                phase=self.phase,
                iteration=self.iteration,
                op="free",
            )
        )

    @property
    def thread(self) -> Thread:
        return Thread.AUTOGRAD if self.phase is Phase.BACKWARD else Thread.MAIN

    # -- dispatch -------------------------------------------------------------------------

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func is _DEVICE:
            # NB: the autograd engine asks every fake tensor's device many times per op (two
            # thirds of all dispatches); answered here as FakeTensor itself answers it, without
            # the trip through FakeTensorMode.
            tensor = args[0]
            if isinstance(tensor, FakeTensor):
                return (
                    torch.device("meta")
                    if tensor.fake_mode.in_kernel_invocation
                    else (tensor.fake_device)
                )
        kwargs = kwargs or {}
        self.ops += 1
        costed = self.phase is not Phase.SETUP
        if _mutates_only(func):
            # NB: an in-place foreach op (the optimizer's update) returns nothing and allocates
            # nothing; FakeTensorMode would hash every tensor of its lists for its cache and
            # then run a meta kernel per tensor, a third of a large model's trace
            if costed:
                tensors = foreach_tensors(args, kwargs)
                cost = foreach_cost(func, args, kwargs, tensors)
                self.costs.add(cost, self.iteration, self.phase, tensors)
            return None
        if func is aten._local_scalar_dense.default:
            if costed and self._creator_op(args[0]) not in HOST_SCALAR_CREATORS:
                # NB: a value computed on the device (a norm, an `all()` check) is read back
                # through a sync; the optimizers' step counters are host tensors made from
                # Python numbers and read without one
                self.costs.add(SYNC_COST, self.iteration, self.phase)
            return self._assume_scalar(args[0])
        if func in CUBLAS_OPS and self.thread not in self._cublas_threads:
            self._cublas_threads.add(self.thread)
            self.workspaces.append(WorkspaceEvent(index=len(self.events), thread=self.thread))
        key = self._outputs.key(func, args, kwargs)
        if key is not None:
            out = self._outputs.replay(key, args)
            if out is not MISS:
                self._track_outputs(out, _LABEL[0] or func.__name__)
                if costed:
                    self._cost(func, args, kwargs, out, key)
                return out
        try:
            out = None
            if func is _LIFT and self.fake_mode is not None and len(args) == 1 and not kwargs:
                out = lifted(self.fake_mode, args[0])
            if out is None:
                out = func(*args, **kwargs)
        except TraceError:
            raise
        except Exception as exc:
            where = f" in module {self.module_path!r}" if self.module_path else ""
            first = str(exc).splitlines()[0] if str(exc) else ""
            if _needs_data(exc):
                raise TraceError(
                    f"the tracer cannot run op {func}{where} without real data "
                    f"({type(exc).__name__}: {first}); "
                    "measure this model on the device instead (trainfit measure)"
                ) from exc
            raise TraceError(
                f"op {func}{where} failed: {type(exc).__name__}: {first}; "
                "check the input shapes and dtypes given for this model"
            ) from exc
        if key is not None:
            self._outputs.remember(key, out, args, kwargs)
        self._track_outputs(out, _LABEL[0] or func.__name__)
        if costed:
            self._cost(func, args, kwargs, out, key)
        return out

    def _cost(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        out: Any,
        key: tuple[object, ...] | None,
    ) -> None:
        costs = self.costs
        # NB: the same op issued with and without an autograd node costs the host differently
        key = None if key is None else (*key, graph_op(args, kwargs))
        index = costs.by_key.get(key) if key is not None else None
        if index is None:
            index = costs.add(op_cost(func, args, kwargs, out), self.iteration, self.phase)
            if key is not None:
                costs.by_key[key] = index
        else:
            costs.add_index(index, self.iteration, self.phase)

    def _track_outputs(self, out: Any, name: str) -> None:
        if isinstance(out, torch.Tensor):
            self.track(out, name)
        elif isinstance(out, (tuple, list)):
            for item in out:
                if isinstance(item, torch.Tensor):
                    self.track(item, name)

    def _assume_scalar(self, tensor: torch.Tensor) -> bool | int | float:
        # NB: a value that depends on data (`if mask.all():`) has no answer without data. We
        # answer as unpadded random inputs on the common path would: an `all()` check holds
        # (no padding, no packing); any other test is false (no inf/nan found, no layer
        # dropped by LayerDrop); numbers are 1. The result lists each such answer.
        creator = self._creator_op(tensor)
        if tensor.dtype == torch.bool:
            value: bool | int | float = creator.startswith("all")
        elif tensor.dtype.is_floating_point:
            value = 1.0
        else:
            value = 1
        if self.phase in (Phase.FORWARD, Phase.BACKWARD):
            # the optimizer's step counters are host scalars, not data: no note for them
            note = DataCheck(op=creator, module=self.module_path, answer=Answer(str(value)))
            if note not in self.assumptions:
                self.assumptions.append(note)
        return value

    def _creator_op(self, tensor: torch.Tensor) -> str:
        key = self._keys.get(id(tensor.untyped_storage()))
        return self._ops.get(key, "") if key is not None else ""


_MUTATES_ONLY: dict[Any, bool] = {}


def _mutates_only(func: Any) -> bool:
    """Whether `func` is an in-place foreach op with no outputs (`_foreach_mul_` and kin)."""
    known = _MUTATES_ONLY.get(func)
    if known is None:
        name = func.__name__.split(".")[0]
        known = name.startswith("_foreach_") and name.endswith("_") and not func._schema.returns
        _MUTATES_ONLY[func] = known
    return known


def _needs_data(exc: Exception) -> bool:
    """Whether an op failed for want of real data or a fake kernel, not for bad arguments."""
    if isinstance(
        exc,
        (
            NotImplementedError,
            DataDependentOutputException,
            DynamicOutputShapeException,
            UnsupportedOperatorException,
        ),
    ):
        return True
    text = str(exc).lower()
    return "fake impl" in text or "meta" in text or "data-dependent" in text
