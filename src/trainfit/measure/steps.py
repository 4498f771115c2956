"""`measure()`: warm-up plus N real training steps of a spec on the local device, each alone,
then N back to back (a training loop's step time).

The step is `trainfit.training`'s, the one the estimator traces: the model built on the CPU in
fp32 and moved to the device (cast to bf16 for pure-bf16), PyTorch's default optimizer path,
`torch.autocast(device, dtype)` for fp16/bf16 with a GradScaler for fp16, allocator defaults,
no `empty_cache`. Memory peaks are read at every phase boundary of every synced step, warm-up
included (the first step creates the optimizer state), and each timed step's wall time, ended by
a device synchronisation, is kept (`Measured.step_seconds`). Then a window of steps runs back to
back with nothing that waits for the device between them: its time over its steps is the step
time of a training loop (`Measured.loop_step_seconds`, `trainfit.measure.window`), the quantity
the estimate models and the one the throughput is given at.

Faults, each a `MeasureError` with one line: no such device; a model that fails its own
forward or backward (naming the innermost module that was running); out of memory (naming the
phase and iteration, and what was free at the start). Ctrl-C during the timed steps or the
window stops the run and returns what was measured, marked `interrupted` (an interrupted window
gives no loop figure).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainfit.errors import USER_CODE_ERRORS, MeasureError, message_of, user_frame
from trainfit.hardware.catalog import DeviceKind
from trainfit.hardware.units import GIB
from trainfit.measure.backend import Backend, backend_for, is_out_of_memory
from trainfit.measure.marks import PhaseMarks, PhaseMemory, PhaseSeconds, unique_bytes
from trainfit.measure.window import LoopWindow, time_window
from trainfit.models.lora import check_runnable
from trainfit.models.source import build_program
from trainfit.optim import measured_optimizer
from trainfit.progress import Activity, Part, tell
from trainfit.spec import Precision, TrainSpec
from trainfit.training import (
    Phase,
    StepRig,
    apply_settings,
    needs_scaler,
    no_context,
    run_iteration,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Measured:
    """What real steps of a spec used and took on the local device."""

    device_name: str
    kind: DeviceKind
    """CUDA, MPS or CPU."""
    warmup: int
    steps: int
    """Timed synced steps completed (fewer than asked when interrupted)."""
    interrupted: bool
    micro_batch: int
    grad_accum: int
    tokens_per_sample: int | None
    peak_allocated_bytes: int | None
    """The allocator's peak of live tensors (None on the CPU)."""
    peak_reserved_bytes: int | None
    """The allocator's peak taken from the device (MPS: the driver's allocation)."""
    peak_used_bytes: int
    """The process's peak memory on the device: CUDA from NVML or cudaMemGetInfo (see
    `used_method`), MPS the driver's allocation, the CPU the resident set's increase."""
    device_needed_bytes: int
    """What the step needs free on the device, comparable with the estimate's device memory
    needed: CUDA peak reserved + the process's memory outside the allocator (its context);
    MPS and the CPU the peak used."""
    used_method: str
    baseline_used_bytes: int
    """In use on the device when the run started (other processes; the CPU: this process's
    resident set before the model was built)."""
    total_memory_bytes: int | None
    free_at_start_bytes: int | None
    free_at_end_bytes: int | None
    """Free device memory after the last step (the model and its optimizer still held)."""
    parameter_bytes: int
    gradient_bytes: int | None
    """Bytes of .grad tensors after the first step's last backward."""
    optimizer_state_bytes: int | None
    activation_bytes: int | None
    """Allocated after the first forward minus before it (None without allocator counters)."""
    phases: tuple[PhaseMemory, ...]
    """Each synced step's phases (the loop window's steps read none)."""
    step_seconds: tuple[float, ...]
    """Each timed step alone: its wall time, the device synchronised at its end (and, the step
    before it being synchronised too, idle at its start)."""
    loop: LoopWindow | None = None
    """The window of steps run back to back after the synced ones, whose time over its steps
    is the loop's steady step time (`trainfit.measure.window`); None when none ran (interrupted
    first, or `measure(loop_steps=0)`)."""
    phase_seconds: tuple[PhaseSeconds, ...] = ()
    """Per timed step, device time by phase (`measure(phase_times=True)`, CUDA only)."""
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def samples_per_step(self) -> int:
        return self.micro_batch * self.grad_accum

    @property
    def median_step_seconds(self) -> float | None:
        """The median synced step (each step timed alone)."""
        return statistics.median(self.step_seconds) if self.step_seconds else None

    @property
    def loop_step_seconds(self) -> float | None:
        """The step time: a training loop's steady period, from the loop window (None when no
        window ran). The estimate's step time is this quantity."""
        return None if self.loop is None else self.loop.step_seconds

    @property
    def step_spread_seconds(self) -> tuple[float, float] | None:
        """(fastest, slowest) synced step."""
        return (min(self.step_seconds), max(self.step_seconds)) if self.step_seconds else None

    @property
    def samples_per_second(self) -> float | None:
        """At the loop's step time (None when no loop window ran)."""
        step = self.loop_step_seconds
        return None if not step else self.samples_per_step / step

    @property
    def tokens_per_second(self) -> float | None:
        rate = self.samples_per_second
        return (
            None
            if rate is None or self.tokens_per_sample is None
            else (rate * self.tokens_per_sample)
        )

    @property
    def peak_phase(self) -> PhaseMemory | None:
        """The phase holding the peak (allocated where counted, else used)."""
        if not self.phases:
            return None
        return max(self.phases, key=lambda p: p.peak_allocated_bytes or p.peak_used_bytes or 0)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (bytes as integers, seconds as floats)."""
        peak = self.peak_phase
        return {
            "device": self.device_name,
            "kind": self.kind.value,
            "warmup": self.warmup,
            "steps": self.steps,
            "interrupted": self.interrupted,
            "micro_batch": self.micro_batch,
            "grad_accum": self.grad_accum,
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "peak_reserved_bytes": self.peak_reserved_bytes,
            "peak_used_bytes": self.peak_used_bytes,
            "device_needed_bytes": self.device_needed_bytes,
            "used_method": self.used_method,
            "baseline_used_bytes": self.baseline_used_bytes,
            "total_memory_bytes": self.total_memory_bytes,
            "free_at_start_bytes": self.free_at_start_bytes,
            "parameter_bytes": self.parameter_bytes,
            "gradient_bytes": self.gradient_bytes,
            "optimizer_state_bytes": self.optimizer_state_bytes,
            "activation_bytes": self.activation_bytes,
            "peak_phase": None
            if peak is None
            else {"phase": peak.phase.value, "iteration": peak.iteration},
            "step_seconds": list(self.step_seconds),
            "median_step_seconds": self.median_step_seconds,
            "loop_steps": None if self.loop is None else self.loop.steps,
            "loop_seconds": None if self.loop is None else self.loop.seconds,
            "loop_step_seconds": self.loop_step_seconds,
            "samples_per_second": self.samples_per_second,
            "tokens_per_second": self.tokens_per_second,
            "versions": self.versions,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class StepDone:
    """One real step just completed (`measure(on_step=...)`)."""

    index: int
    """0-based, warm-up steps first."""
    total: int
    """Warm-up plus timed synced steps (the loop window's steps are not counted)."""
    warmup: bool
    seconds: float
    """Wall time of the step, synchronised."""


def device_rig(
    spec: TrainSpec, device: torch.device, build_on: str = "cpu"
) -> tuple[StepRig, list[nn.Parameter]]:
    """The model, optimizer, autocast and scaler of `spec` on `device` (CUDA, MPS or the
    CPU), as a user's loop would set them up: PyTorch's tf32 defaults for the precision,
    `torch.autocast(device type, dtype)` for fp16/bf16 with a GradScaler for fp16.
    `build_on="cpu"` builds and initialises the model on the CPU in fp32 and moves it (the
    memory benchmark's way); "device" builds it on the device (fast for big models; the
    weights are still initialised). Pure-bf16 casts the model to bf16."""
    check_runnable(spec.lora)
    program = build_program(spec, "cpu" if build_on == "cpu" else device)
    trainable = apply_settings(program, spec)
    dtype = torch.bfloat16 if spec.precision is Precision.PURE_BF16 else None
    program.model.to(device=device, dtype=dtype)
    if device.type == "cuda":
        if spec.precision is Precision.FP32:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = True  # PyTorch's default for convolutions
        elif spec.precision is Precision.TF32:
            torch.backends.cuda.matmul.allow_tf32 = True
    optimizer = measured_optimizer(spec.optimizer, trainable, spec.optimizer_path)
    autocast_dtype = spec.precision.autocast_dtype
    autocast: Callable[[], Any] = no_context
    if autocast_dtype is not None:

        def autocast() -> torch.autocast:
            return torch.autocast(device.type, dtype=autocast_dtype)

    scaler = torch.amp.GradScaler(device.type) if needs_scaler(spec.precision) else None
    rig = StepRig(program=program, optimizer=optimizer, autocast=autocast, scaler=scaler, spec=spec)
    return rig, trainable


def optimizer_state_bytes(optimizer: torch.optim.Optimizer, device: torch.device) -> int:
    """Bytes of the optimizer's state tensors on `device`'s type (not its CPU step counts)."""
    return unique_bytes(
        [
            v
            for state in optimizer.state.values()
            for v in state.values()
            if isinstance(v, torch.Tensor) and v.device.type == device.type
        ]
    )


class ModuleTracker:
    """The qualified name of the innermost module running, through forward hooks; on an error
    the module that raised is the last one entered and not left."""

    def __init__(self, model: nn.Module) -> None:
        self.stack: list[str] = []
        self._handles: list[Any] = []
        for name, module in model.named_modules():
            self._handles.append(module.register_forward_pre_hook(self._enter(name or "<model>")))
            self._handles.append(module.register_forward_hook(self._leave))

    def _enter(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            self.stack.append(name)

        return hook

    def _leave(self, module: nn.Module, args: Any, output: Any) -> None:
        if self.stack:
            self.stack.pop()

    @property
    def current(self) -> str | None:
        return self.stack[-1] if self.stack else None

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


def measure(
    spec: TrainSpec | None = None,
    *,
    sample: Any = None,
    steps: int = 10,
    warmup: int = 3,
    device: str | None = None,
    backend: Backend | None = None,
    build_on: str = "cpu",
    phase_times: bool = False,
    on_step: Callable[[StepDone], None] | None = None,
    loop_steps: int | None = None,
    on_loop: Callable[[LoopWindow], None] | None = None,
    **fields: Any,
) -> Measured:
    """Run `warmup` + `steps` real optimizer steps of `spec` on the local device, each
    synchronised, then a window of `loop_steps` steps back to back (None: as many as `steps`;
    0: none), and measure them. `device` is "cuda", "cuda:N", "mps" or "cpu" (None: the best
    one here); `build_on` as for `device_rig`; `phase_times`: CUDA events at the phase marks
    time each phase of the synced timed steps (`Measured.phase_seconds`). With no warm-up the
    first step is timed too. `on_step` is called as each synced step (warm-up included)
    completes, with its wall time; `on_loop` with the window once it completes
    (`Measured.loop`). Or TrainSpec fields as keyword arguments, as `estimate` takes them: a
    live `nn.Module` with its `sample` is run as a copy with its weights."""
    from trainfit.models.live import given_spec

    with given_spec("measure", spec, fields, sample, weights=True) as given:
        return _measure(
            given, steps, warmup, device, backend, build_on, phase_times, on_step, loop_steps,
            on_loop,
        )  # fmt: skip


def _measure(
    spec: TrainSpec,
    steps: int,
    warmup: int,
    device: str | None,
    backend: Backend | None,
    build_on: str,
    phase_times: bool,
    on_step: Callable[[StepDone], None] | None,
    loop_steps: int | None,
    on_loop: Callable[[LoopWindow], None] | None,
) -> Measured:
    loop_steps = steps if loop_steps is None else loop_steps
    if steps < 1 or warmup < 0 or loop_steps < 0:
        raise MeasureError(
            f"measure runs at least 1 timed step after 0 or more warm-up steps, then 0 or more "
            f"steps back to back, got steps={steps}, warmup={warmup}, loop_steps={loop_steps}"
        )
    check_runnable(spec.lora)
    backend = backend or backend_for(device)
    if phase_times and backend.kind is not DeviceKind.CUDA:
        raise MeasureError(f"phase times are read from CUDA events; {backend.name()} has none")
    _import_model(spec)
    free_at_start = backend.free_memory()
    backend.start()
    failure = None
    try:
        rig, trainable = device_rig(spec, backend.device, build_on)
        batch = rig.program.make_batch(backend.device, True)
    except USER_CODE_ERRORS as exc:
        failure = setup_failure(exc, backend, free_at_start)
    if failure is not None:
        raise failure
    marks = PhaseMarks(backend, trainable, phase_times)
    backend.synchronize()
    marks(Phase.SETUP)
    run = _Run(rig, batch, backend, marks, warmup=warmup, steps=steps)
    tracker = ModuleTracker(rig.program.model)
    try:
        run.synced(tracker, on_step)
        if loop_steps and run.callback_error is None:
            run.loop(loop_steps, on_loop)
    except KeyboardInterrupt:
        if marks.iteration == 0:
            raise
        run.interrupted = True
    except USER_CODE_ERRORS as exc:
        # NB: raised after the handler, so that the error does not keep the failed step's
        # frames (and their tensors) alive as its __context__
        failure = _failure(exc, spec, backend, marks, tracker.current, free_at_start)
    finally:
        tracker.remove()
    if failure is not None:
        raise failure
    if run.callback_error is not None:
        raise run.callback_error
    return _measured(spec, run, free_at_start)


class _Run:
    """The steps of one `measure()`: the synced ones, then the loop window; what they took."""

    def __init__(
        self,
        rig: StepRig,
        batch: Any,
        backend: Backend,
        marks: PhaseMarks,
        *,
        warmup: int,
        steps: int,
    ) -> None:
        self.rig, self.batch, self.backend, self.marks = rig, batch, backend, marks
        self.warmup, self.steps = warmup, steps
        self.times: list[float] = []
        self.window: LoopWindow | None = None
        self.interrupted = False
        self.callback_error: Exception | None = None

    def synced(self, tracker: ModuleTracker, on_step: Callable[[StepDone], None] | None) -> None:
        """The warm-up and timed steps, each alone: the memory read at every phase mark, the
        device synchronised at the step's end."""
        rig, batch, backend, marks = self.rig, self.batch, self.backend, self.marks
        warmup, total = self.warmup, self.warmup + self.steps
        for i in range(total):
            marks.iteration = i
            _tell_step(i, warmup, self.steps)
            start = time.perf_counter()
            run_iteration(rig, batch, marks)
            marks.stamp(Phase.SETUP)
            backend.synchronize()
            took = time.perf_counter() - start
            if i >= warmup:
                self.times.append(took)
            if on_step is not None:
                done = StepDone(index=i, total=total, warmup=i < warmup, seconds=took)
                if not self._called(on_step, done):
                    return
            marks(Phase.SETUP)
            if i == 0:
                tracker.remove()

    def loop(self, count: int, on_loop: Callable[[LoopWindow], None] | None) -> None:
        """`count` steps back to back, nothing read between them (`trainfit.measure.window`)."""
        index = itertools.count(self.warmup + self.steps)

        def step() -> None:
            self.marks.iteration = next(index)
            run_iteration(self.rig, self.batch, self.marks.enter)

        self.window = time_window(self.backend, step, count)
        if on_loop is not None:
            self._called(on_loop, self.window)

    def _called(self, callback: Callable[[Any], None], done: object) -> bool:
        """Call the caller's callback; False when it raised (its error kept to re-raise)."""
        try:
            callback(done)
        except Exception as exc:  # NB: the caller's error, not the model's: re-raised
            self.callback_error = exc
            return False
        return True


def _import_model(spec: TrainSpec) -> None:
    """Tell the progress reporter the build starts, and import the model's modules (a build
    on the meta device) before the memory baseline is read."""
    tell(Part.MEASURE, Activity.BUILD.value)
    build_program(spec, "meta")


def _tell_step(i: int, warmup: int, steps: int) -> None:
    """Tell the progress reporter that step `i` (from 0; warm-up first) starts."""
    doing = Activity.WARMUP if i < warmup else Activity.STEP
    tell(Part.MEASURE, doing.value, index=i + 1, total=warmup + steps)


def _measured(spec: TrainSpec, run: _Run, free_at_start: int | None) -> Measured:
    """The Measured of a completed run. The loop window's peaks (read once, after it) count in
    the run's peaks, not in its phases."""
    backend, rig, marks = run.backend, run.rig, run.marks
    reserved_now = backend.reserved()
    allocated_tail, reserved_tail, used_now = backend.take_peaks()
    if run.window is None:  # NB: nothing ran since the last mark
        allocated_tail = reserved_tail = None
    phases = marks.phases
    peak_used = max([p.peak_used_bytes or 0 for p in phases] + [used_now or 0])
    reserved = marks.reserved_peaks + ([] if reserved_tail is None else [reserved_tail])
    peak_reserved = max(reserved) if reserved else None
    if backend.kind is DeviceKind.CUDA and peak_reserved is not None and reserved_now is not None:
        needed = peak_reserved + max(0, (used_now or 0) - reserved_now)
    else:
        needed = peak_used
    allocated = [p.peak_allocated_bytes for p in phases] + [allocated_tail]
    return Measured(
        device_name=backend.name(),
        kind=backend.kind,
        warmup=run.warmup,
        steps=len(run.times),
        interrupted=run.interrupted,
        micro_batch=spec.batch,
        grad_accum=spec.grad_accum,
        tokens_per_sample=rig.program.tokens_per_sample,
        peak_allocated_bytes=max((a for a in allocated if a is not None), default=None),
        peak_reserved_bytes=peak_reserved,
        peak_used_bytes=peak_used,
        device_needed_bytes=needed,
        used_method=getattr(backend, "used_method", "") or _USED_METHOD[backend.kind],
        baseline_used_bytes=backend.baseline_used(),
        total_memory_bytes=backend.total_memory(),
        free_at_start_bytes=free_at_start,
        free_at_end_bytes=backend.free_memory(),
        parameter_bytes=unique_bytes(list(rig.program.model.parameters())),
        gradient_bytes=marks.grad,
        optimizer_state_bytes=optimizer_state_bytes(rig.optimizer, backend.device),
        activation_bytes=marks.activation,
        phases=tuple(p for p in phases if p.phase is not Phase.SETUP),
        step_seconds=tuple(run.times),
        loop=run.window,
        phase_seconds=marks.phase_seconds(run.warmup),
        versions=backend.versions(),
    )


_USED_METHOD = {
    DeviceKind.CUDA: "cudaMemGetInfo",
    DeviceKind.MPS: "torch.mps.driver_allocated_memory at phase boundaries",
    DeviceKind.CPU: "resident set increase (VmHWM on Linux, ru_maxrss elsewhere)",
}


def first_line(exc: BaseException) -> str:
    """The exception's type, the first line of its message (300 characters at most) and the
    user's frame that raised it, where known."""
    text = message_of(exc).strip()
    line = f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__
    where = user_frame(exc)
    return f"{line} (at {where})" if where else line


def setup_failure(exc: BaseException, backend: Backend, free_at_start: int | None) -> MeasureError:
    """One line for an error while building the model on the device and making its batch."""
    if isinstance(exc, MeasureError):
        return exc
    if is_out_of_memory(exc):
        free = "" if free_at_start is None else f" ({free_at_start / GIB:.2f} GiB was free)"
        return MeasureError(
            f"out of memory on {backend.name()} while moving the model to the device{free}: "
            "its weights alone do not fit; see `trainfit plan` for what does"
        )
    return MeasureError(f"the model could not be set up on {backend.name()}: {first_line(exc)}")


def _failure(
    exc: BaseException,
    spec: TrainSpec,
    backend: Backend,
    marks: PhaseMarks,
    module: str | None,
    free_at_start: int | None,
) -> MeasureError:
    """One line for a step that raised: out of memory, or the model's own error."""
    phase = marks.phase
    where = f"step {marks.iteration + 1}"
    if phase is Phase.FORWARD and module is not None:
        where += f" (in module {module})"
    if is_out_of_memory(exc):
        total = backend.total_memory()
        free = "" if free_at_start is None else f"; {free_at_start / GIB:.2f} GiB was free"
        of = "" if total is None else f" of {total / GIB:.2f} GiB"
        return MeasureError(
            f"out of memory on {backend.name()} in the {phase.value} pass of {where} at "
            f"micro-batch {spec.batch}"
            f"{free}{of} at the start; find what fits with `trainfit measure --max-batch` "
            "or `trainfit plan`"
        )
    return MeasureError(
        f"the model failed its own {phase.value} pass at {where}: {first_line(exc)}"
    )
