"""The real largest micro-batch on the local device, found by search with out-of-memory recovery.

`find_max_batch(spec)` runs attempts in this process. An attempt at micro-batch b builds a
fresh optimizer (and GradScaler) for the model, which is built once, runs `steps` real
optimizer steps at b (default 3: the first creates the optimizer state, the others are the
steady state, where the allocator's cache is already split by the first),
then, unless `evaluate=False`, one evaluation forward (`model.eval()`, `torch.no_grad()`, the
same autocast) at the evaluation batch, with the optimizer state still held, as a training
loop's evaluation runs. After every attempt, fitting or not, the gradients, optimizer, scaler,
batch and the failed step's frames are dropped, garbage is collected and the allocator's cache
is emptied; the allocated memory left is recorded per attempt, so a leak shows.

An attempt *fits* when its training steps complete. An out-of-memory in the evaluation pass
does not make the training batch fail: it is reported on its own, with the largest evaluation
batch that does fit beside the training maximum (found by the same search, each attempt
training at the maximum first).

The search starts at the estimator's prediction for the local card where it has one (`start`),
else at 1; it steps away from the start (max(1, 2% of it), doubling) until the answer flips,
then bisects. Under torchrun (an initialised process group) every rank runs each attempt and
the ranks agree on it (all-reduce of "fits" with MIN), so all ranks take the same path and
return the same answer.

With `effective_batch`, the answer keeps it: the micro-batch is the largest divisor of the
per-rank effective batch that fits, and accumulation makes up the rest.

Known limitations:
- One process's model, not DDP's: DDP's gradient buckets (about the gradients' size again) are
  not in the attempt; search under DDP by passing `reserve_bytes` (kept allocated meanwhile).
- Near the largest micro-batch, fitting is not monotone in the batch (the allocator's
  out-of-memory retry frees cached segments and may then find room that a smaller batch's
  layout did not leave), so the search reports *a* batch that fits with the next one out of
  memory; a smaller batch may still fail. `benchmarks/measure/` compares the answers with
  one-process-per-batch searches.
- Attempts share the process: cuBLAS/cuDNN workspaces and the CUDA context made by the first
  attempt stay, as they would in training. A fresh process per attempt (the benchmark
  `benchmarks/max_batch/bisect_gpu.py`) is stricter and slower.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from trainfit.errors import MeasureError
from trainfit.hardware.catalog import DeviceKind
from trainfit.measure.backend import Backend, backend_for, is_out_of_memory
from trainfit.measure.steps import ModuleTracker, device_rig, first_line, setup_failure
from trainfit.models.source import build_program
from trainfit.optim import measured_optimizer
from trainfit.progress import Activity, Part, tell
from trainfit.spec import TrainSpec
from trainfit.training import Phase, StepRig, needs_scaler, run_iteration


@dataclass(frozen=True, kw_only=True, slots=True)
class Raised:
    """The attempt raised: `line` is the error's type, first line and frame (`first_line`)."""

    line: str
    out_of_memory: bool
    """False: a failure of the model itself (the search stops on every rank)."""
    module: str | None = None
    """The module whose forward was running when it raised (a failure that is not out of
    memory, in the forward pass)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PastRam:
    """On the CPU: the process grew by `grew_bytes`, past the `available_bytes` of RAM free at
    the start (the attempt counts as out of memory)."""

    grew_bytes: int
    available_bytes: int


AttemptFailure = Raised | PastRam
"""What stopped an attempt (words: `trainfit.report.measure`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Attempt:
    """One try of one micro-batch."""

    micro_batch: int
    eval_batch: int | None
    """The evaluation batch tried after training (None: no evaluation)."""
    fits: bool
    """The training steps completed on every rank."""
    eval_fits: bool | None
    """The evaluation pass completed (None: not run)."""
    failed_phase: str | None
    """"forward", "backward", "optimizer" or "evaluation" where memory ran out here."""
    failure: AttemptFailure | None
    """What stopped the attempt on this rank (None: nothing did)."""
    peak_reserved_bytes: int | None
    peak_used_bytes: int | None
    left_allocated_bytes: int | None
    """Allocated after the attempt's clean-up (the model, and library workspaces)."""
    seconds: float


def broke(attempt: Attempt) -> bool:
    """Whether `attempt` failed other than by running out of memory."""
    failure = attempt.failure
    return isinstance(failure, Raised) and not failure.out_of_memory


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchInterrupted:
    """Ctrl-C stopped the search: the answer lies between the bounds reached."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Leaked:
    """More was left allocated after the last attempt than after the first."""

    nbytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Agreed:
    """The answer was agreed over `world_size` ranks, `rank` reporting."""

    world_size: int
    rank: int


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalShort:
    """Evaluation at `eval_batch` ran out of memory after training at `trained`; `largest`
    runs there."""

    eval_batch: int
    trained: int
    largest: int


@dataclass(frozen=True, kw_only=True, slots=True)
class NoDivisor:
    """A rank's share of the effective batch has no divisor between `chosen` and the largest
    micro-batch; an effective batch of `better` would run micro-batches of `micro`."""

    per_rank: int
    chosen: int
    micro: int
    better: int


MaxBatchNote = SearchInterrupted | Leaked | Agreed | EvalShort | NoDivisor
"""What a max-batch search's figures do not say (words: `trainfit.report.measure`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RealMaxBatch:
    """The largest micro-batch whose training steps run on the local device."""

    device_name: str
    micro_batch: int
    """0 when not even one sample fits."""
    first_failing: int | None
    """The smallest micro-batch that ran out of memory (None: the search stopped at `limit`)."""
    limit: int
    predicted: int | None
    """The estimator's largest micro-batch for the local card, where it had one."""
    max_eval_batch: int | None
    """The largest evaluation batch that runs after training at `micro_batch` (None when
    evaluation was not checked; equal to micro_batch when it fits there)."""
    effective_batch: int | None
    chosen_micro_batch: int | None
    """With `effective_batch`: the largest divisor of its per-rank share that fits."""
    grad_accum: int | None
    world_size: int
    attempts: tuple[Attempt, ...]
    leaked_bytes: int
    """Growth of the memory left allocated after clean-up, first attempt to last (0: none)."""
    notes: tuple[MaxBatchNote, ...]
    interrupted: bool = False
    """Ctrl-C stopped the search: `micro_batch` and `first_failing` are the bounds reached."""


Probe = Callable[[int, int | None], Attempt]
"""(micro-batch, evaluation batch or None) -> the attempt's result on this rank."""


def world() -> tuple[int, int]:
    """(rank, world size) of the initialised process group, else (0, 1)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def agree(values: list[int], device: torch.device) -> list[int]:
    """Each value's minimum over the process group's ranks (itself without one): one
    collective per call, so every rank must call it the same number of times."""
    if world()[1] == 1:
        return values
    backend = torch.distributed.get_backend()
    where = device if backend == "nccl" else torch.device("cpu")
    tensor = torch.tensor(values, dtype=torch.int64, device=where)
    torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MIN)
    return [int(v) for v in tensor.tolist()]


FITS, OUT_OF_MEMORY, FAILED = 2, 1, 0
"""An attempt's status as the ranks agree on it (MIN: one failing rank fails them all)."""


def _status(fits: bool | None, failed: bool) -> int:
    if failed:
        return FAILED
    return FITS if fits or fits is None else OUT_OF_MEMORY


class _Prober:
    """Attempts on a model built once; everything else rebuilt per attempt."""

    def __init__(
        self, spec: TrainSpec, backend: Backend, steps: int, ram_budget: int | None = None
    ) -> None:
        self.spec = spec
        self.backend = backend
        self.steps = steps
        self.ram_budget = ram_budget
        """On the CPU: the resident memory an attempt may add (RAM free at the start); an
        attempt past it fails, before the kernel's out-of-memory killer would end the run."""
        self.module: str | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        rig, self.trainable = device_rig(spec, backend.device)
        self.model = rig.program.model
        self.autocast = rig.autocast
        del rig
        backend.release()

    def __call__(self, micro: int, eval_batch: int | None) -> Attempt:
        started = time.perf_counter()
        backend = self.backend
        state: dict[str, Any] = {"phase": Phase.SETUP, "iteration": 0}
        fits, eval_fits, failed = True, None, None
        failure: AttemptFailure | None = None
        backend.take_peaks()
        try:
            self._train(micro, state)
        except Exception as exc:
            fits, failed = False, state["phase"].value
            failure = self._describe(exc)
        if fits and eval_batch is not None:
            tell(Part.MEASURE, Activity.EVALUATE.value, batch=eval_batch)
            try:
                self._evaluate(eval_batch)
                eval_fits = True
            except Exception as exc:
                eval_fits, failed = False, "evaluation"
                failure = self._describe(exc)
        _, reserved, used = backend.take_peaks()
        if fits and self.ram_budget is not None and used is not None and used > self.ram_budget:
            fits, eval_fits, failed = False, None, "host memory"
            failure = PastRam(grew_bytes=used, available_bytes=self.ram_budget)
        self._clean()
        return Attempt(
            micro_batch=micro,
            eval_batch=eval_batch,
            fits=fits,
            eval_fits=eval_fits,
            failed_phase=failed,
            failure=failure,
            peak_reserved_bytes=reserved,
            peak_used_bytes=used,
            left_allocated_bytes=backend.allocated(),
            seconds=round(time.perf_counter() - started, 3),
        )

    def _program(self, micro: int) -> Any:
        program = build_program(dataclasses.replace(self.spec, batch=micro), "meta")
        return dataclasses.replace(program, model=self.model)

    def _train(self, micro: int, state: dict[str, Any]) -> None:
        spec = dataclasses.replace(self.spec, batch=micro)
        program = self._program(micro)
        optimizer = measured_optimizer(spec.optimizer, self.trainable, spec.optimizer_path)
        scaler = (
            torch.amp.GradScaler(self.backend.kind.value) if needs_scaler(spec.precision) else None
        )
        rig = StepRig(
            program=program, optimizer=optimizer, autocast=self.autocast, scaler=scaler, spec=spec
        )
        self._optimizer = optimizer  # NB: kept for the evaluation pass; dropped in _clean
        batch = program.make_batch(self.backend.device, True)

        def mark(phase: Phase) -> None:
            state["phase"] = phase

        tracker = ModuleTracker(self.model)
        self.module = None
        try:
            for i in range(self.steps):
                state["iteration"] = i
                run_iteration(rig, batch, mark)
                tracker.remove()
            self.backend.synchronize()
        except Exception:
            self.module = tracker.current if state["phase"] is Phase.FORWARD else None
            raise
        finally:
            tracker.remove()

    def _evaluate(self, eval_batch: int) -> None:
        program = self._program(eval_batch)
        batch = program.make_batch(self.backend.device, True)
        self.model.eval()
        try:
            with torch.no_grad(), self.autocast():
                program.compute_loss(self.model, batch)
            self.backend.synchronize()
        finally:
            self.model.train()

    def _describe(self, exc: Exception) -> Raised:
        """What `exc` says, and the module running when it is not out of memory."""
        exc.__traceback__ = None  # NB: the frames hold the failed step's tensors
        if is_out_of_memory(exc):
            return Raised(line=first_line(exc), out_of_memory=True)
        return Raised(line=first_line(exc), out_of_memory=False, module=self.module)

    def _clean(self) -> None:
        for p in self.model.parameters():
            p.grad = None
        self._optimizer = None
        self.model.train()
        self.backend.release()


def find_max_batch(
    spec: TrainSpec | None = None,
    *,
    sample: Any = None,
    effective_batch: int | None = None,
    eval_batch: int | None = None,
    evaluate: bool = True,
    steps: int = 3,
    limit: int = 4096,
    start: int | None = None,
    device: str | None = None,
    backend: Backend | None = None,
    probe: Probe | None = None,
    reserve_bytes: int = 0,
    **fields: Any,
) -> RealMaxBatch:
    """The largest micro-batch of `spec` that trains on the local device (see the module).

    Or TrainSpec fields as keyword arguments, as `estimate` takes them: a live `nn.Module` with
    its `sample` trains as a copy with its weights (`device` is still the local device)."""
    from trainfit.models.live import given_spec

    with given_spec("find_max_batch", spec, fields, sample, weights=True) as given:
        return _find_max_batch(
            given, effective_batch, eval_batch, evaluate, steps, limit, start, device, backend,
            probe, reserve_bytes,
        )  # fmt: skip


def _find_max_batch(
    spec: TrainSpec,
    effective_batch: int | None,
    eval_batch: int | None,
    evaluate: bool,
    steps: int,
    limit: int,
    start: int | None,
    device: str | None,
    backend: Backend | None,
    probe: Probe | None,
    reserve_bytes: int,
) -> RealMaxBatch:
    rank, world_size = world()
    predicted = start
    _check_arguments(steps, limit, effective_batch, eval_batch, world_size)
    per_rank = None if effective_batch is None else effective_batch // world_size
    if per_rank is not None:
        limit = min(limit, per_rank)
    backend = backend or backend_for(device)
    # NB: every rank searches from the same start to the same limit, or their paths part
    start, limit = agree([max(1, min(start or 1, limit)), limit], backend.device)
    ram_budget = backend.free_memory() if backend.kind is DeviceKind.CPU else None
    backend.start()
    held = None
    if probe is None:
        probe, held = _set_up(spec, backend, steps, ram_budget, reserve_bytes)
    tries = _Tries(probe=probe, backend=backend, eval_batch=eval_batch, evaluate=evaluate)
    notes: list[MaxBatchNote] = []
    interrupted = False
    low, high, max_eval = 0, None, None
    try:
        low, high = _search(tries.fits, start, limit)
        if evaluate and low > 0:
            max_eval = _max_eval(tries, low, eval_batch, notes)
    except KeyboardInterrupt:
        interrupted = True
        low = max((a.micro_batch for a in tries.attempts if a.fits), default=0)
        high = min((a.micro_batch for a in tries.attempts if not a.fits), default=None)
        notes.append(SearchInterrupted())
    del held
    chosen, accum = _per_rank_split(per_rank, low, world_size, notes)
    left = [a.left_allocated_bytes for a in tries.attempts if a.left_allocated_bytes is not None]
    leaked = max(0, left[-1] - left[0]) if left else 0
    if leaked:
        notes.append(Leaked(nbytes=leaked))
    if world_size > 1:
        notes.append(Agreed(world_size=world_size, rank=rank))
    return RealMaxBatch(
        device_name=backend.name(),
        micro_batch=low,
        first_failing=high,
        limit=limit,
        predicted=predicted,
        max_eval_batch=max_eval,
        effective_batch=effective_batch,
        chosen_micro_batch=chosen,
        grad_accum=accum,
        world_size=world_size,
        attempts=tuple(tries.attempts),
        leaked_bytes=leaked,
        notes=tuple(notes),
        interrupted=interrupted,
    )


def _check_arguments(
    steps: int, limit: int, effective_batch: int | None, eval_batch: int | None, world_size: int
) -> None:
    """MeasureError naming every bad argument."""
    problems = []
    if steps < 1:
        problems.append(f"steps must be at least 1, got {steps}")
    if limit < 1:
        problems.append(f"limit must be at least 1, got {limit}")
    if effective_batch is not None and (effective_batch < 1 or effective_batch % world_size != 0):
        problems.append(
            f"the effective batch {effective_batch} does not split over {world_size} ranks: "
            f"use a multiple of {world_size}"
        )
    if eval_batch is not None and eval_batch < 1:
        problems.append(f"the evaluation batch must be at least 1, got {eval_batch}")
    if problems:
        raise MeasureError("; ".join(problems))


def _set_up(
    spec: TrainSpec, backend: Backend, steps: int, ram_budget: int | None, reserve_bytes: int
) -> tuple[Probe, torch.Tensor | None]:
    """The model built once on the device, and `reserve_bytes` held there beside it; every
    rank raises when one could not."""
    held = None
    failure = None
    prober = None
    try:
        if reserve_bytes:
            held = torch.empty(reserve_bytes, dtype=torch.uint8, device=backend.device)
        tell(Part.MEASURE, Activity.BUILD.value)
        prober = _Prober(spec, backend, steps, ram_budget)
    except Exception as exc:
        failure = setup_failure(exc, backend, ram_budget)
    if agree([failure is None], backend.device) != [1] or prober is None:
        raise failure or MeasureError("another rank could not set the model up: see its error")
    return prober, held


@dataclass(kw_only=True, slots=True)
class _Tries:
    """Attempts agreed over the ranks, in the order made; each micro-batch trained once."""

    probe: Probe
    backend: Backend
    eval_batch: int | None
    evaluate: bool
    attempts: list[Attempt] = field(default_factory=list)
    known: dict[int, Attempt] = field(default_factory=dict)

    def attempt(self, micro: int, evaluation: int | None) -> Attempt:
        tell(Part.MEASURE, Activity.ATTEMPT.value, batch=micro)
        mine = self.probe(micro, evaluation)
        evaluation_failed = mine.failed_phase == "evaluation"
        train, evaluated = agree(
            [
                _status(mine.fits, broke(mine) and not evaluation_failed),
                _status(mine.eval_fits, broke(mine) and evaluation_failed),
            ],
            self.backend.device,
        )
        if FAILED in (train, evaluated):
            raise _search_failed(mine)
        fitted = train == FITS
        result = dataclasses.replace(
            mine,
            fits=fitted,
            eval_fits=None if evaluation is None or not fitted else evaluated == FITS,
        )
        self.attempts.append(result)
        return result

    def fits(self, micro: int) -> bool:
        if micro not in self.known:
            evaluation = (self.eval_batch or micro) if self.evaluate else None
            self.known[micro] = self.attempt(micro, evaluation)
        return self.known[micro].fits


def _search_failed(mine: Attempt) -> MeasureError:
    """The error that stops the search on every rank: this rank's failure, or another's."""
    if not isinstance(mine.failure, Raised) or mine.failure.out_of_memory:
        return MeasureError("another rank failed: see its error")
    module = mine.failure.module
    where = f" (in module {module})" if module else ""
    return MeasureError(
        f"the model failed its own {mine.failed_phase} pass{where} while searching for the "
        f"largest micro-batch: {mine.failure.line}"
    )


def _max_eval(tries: _Tries, low: int, eval_batch: int | None, notes: list[MaxBatchNote]) -> int:
    """The largest evaluation batch that runs after training at `low` (the one asked for, or
    the training batch, when it does)."""
    if tries.known[low].eval_fits:
        return eval_batch or low
    max_eval = _eval_search(tries.attempt, low, eval_batch or low)
    notes.append(EvalShort(eval_batch=eval_batch or low, trained=low, largest=max_eval))
    return max_eval


def _per_rank_split(
    per_rank: int | None, low: int, world_size: int, notes: list[MaxBatchNote]
) -> tuple[int | None, int | None]:
    """(micro-batch, accumulation) of each rank's share of the effective batch: its largest
    divisor that fits; (None, None) without an effective batch or a fitting micro-batch."""
    if per_rank is None or low <= 0:
        return None, None
    chosen = max(d for d in range(1, low + 1) if per_rank % d == 0)
    if chosen < low // 2:
        better = effective_batch_near(per_rank, low) * world_size
        notes.append(NoDivisor(per_rank=per_rank, chosen=chosen, micro=low, better=better))
    return chosen, per_rank // chosen


def effective_batch_near(per_rank: int, micro: int) -> int:
    """The multiple of `micro` nearest `per_rank` (at least `micro`)."""
    return max(1, round(per_rank / micro)) * micro


def _search(fits: Callable[[int], bool], start: int, limit: int) -> tuple[int, int | None]:
    """(largest fitting, smallest failing or None) in [1, limit], from `start` outwards."""
    step = max(1, start // 50)
    if fits(start):
        low, high = start, None
        while high is None and low < limit:
            probe = min(limit, low + step)
            if fits(probe):
                low = probe
                step *= 2
            else:
                high = probe
        if high is None:
            return low, None
    else:
        low, high = 0, start
        while low == 0 and high > 1:
            probe = max(1, high - step)
            if fits(probe):
                low = probe
            else:
                high = probe
                step *= 2
        if low == 0:
            return 0, high
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low, high


def _eval_search(attempt: Callable[[int, int | None], Attempt], micro: int, eval_batch: int) -> int:
    """The largest evaluation batch below `eval_batch` that runs after training at `micro`."""
    low, high = 0, eval_batch
    while high - low > 1:
        middle = (low + high) // 2
        if attempt(micro, middle).eval_fits:
            low = middle
        else:
            high = middle
    return low
