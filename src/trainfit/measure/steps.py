"""`measure()`: warm-up plus N real training steps of a spec on the local device.

The step is `trainfit.training`'s, the one the estimator traces: the model built on the CPU in
fp32 and moved to the device (cast to bf16 for pure-bf16), PyTorch's default optimizer path,
`torch.autocast(device, dtype)` for fp16/bf16 with a GradScaler for fp16, allocator defaults,
no `empty_cache`. Memory peaks are read at every phase boundary of every step, warm-up
included (the first step creates the optimizer state); step times are wall times of the timed
steps, each ended by a device synchronisation.

Faults, each a `MeasureError` with one line: no such device; a model that fails its own
forward or backward (naming the innermost module that was running); out of memory (naming the
phase and iteration, and what was free at the start). Ctrl-C during the timed steps stops the
run and returns what was measured, marked `interrupted`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainfit.errors import MeasureError
from trainfit.measure.backend import Backend, backend_for, is_out_of_memory
from trainfit.models.lora import check_runnable
from trainfit.models.source import build_program
from trainfit.spec import Precision, TrainSpec
from trainfit.training import (
    Phase,
    StepRig,
    apply_settings,
    needs_scaler,
    no_context,
    run_iteration,
    torch_optimizer,
)

GiB = 1 << 30


@dataclass(frozen=True, kw_only=True, slots=True)
class PhaseMemory:
    """Memory peaks within one phase of one step (warm-up steps counted from 0)."""

    iteration: int
    phase: Phase
    peak_allocated_bytes: int | None
    peak_used_bytes: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Measured:
    """What real steps of a spec used and took on the local device."""

    device_name: str
    kind: str
    """"cuda", "mps" or "cpu"."""
    warmup: int
    steps: int
    """Timed steps completed (fewer than asked when interrupted)."""
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
    parameter_bytes: int
    gradient_bytes: int | None
    """Bytes of .grad tensors after the first step's last backward."""
    optimizer_state_bytes: int | None
    activation_bytes: int | None
    """Allocated after the first forward minus before it (None without allocator counters)."""
    phases: tuple[PhaseMemory, ...]
    step_seconds: tuple[float, ...]
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def samples_per_step(self) -> int:
        return self.micro_batch * self.grad_accum

    @property
    def median_step_seconds(self) -> float | None:
        return statistics.median(self.step_seconds) if self.step_seconds else None

    @property
    def step_spread_seconds(self) -> tuple[float, float] | None:
        """(fastest, slowest) timed step."""
        return (min(self.step_seconds), max(self.step_seconds)) if self.step_seconds else None

    @property
    def samples_per_second(self) -> float | None:
        median = self.median_step_seconds
        return None if not median else self.samples_per_step / median

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
            "kind": self.kind,
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
            "samples_per_second": self.samples_per_second,
            "tokens_per_second": self.tokens_per_second,
            "versions": self.versions,
        }


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
    optimizer = torch_optimizer(spec.optimizer, trainable)
    autocast_dtype = spec.precision.autocast_dtype
    autocast: Callable[[], Any] = no_context
    if autocast_dtype is not None:

        def autocast() -> torch.autocast:
            return torch.autocast(device.type, dtype=autocast_dtype)

    scaler = torch.amp.GradScaler(device.type) if needs_scaler(spec.precision) else None
    rig = StepRig(program=program, optimizer=optimizer, autocast=autocast, scaler=scaler, spec=spec)
    return rig, trainable


def unique_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors`."""
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


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
    spec: TrainSpec,
    *,
    steps: int = 10,
    warmup: int = 3,
    device: str | None = None,
    backend: Backend | None = None,
) -> Measured:
    """Run `warmup` + `steps` real optimizer steps of `spec` on the local device and measure
    them. `device` is "cuda", "cuda:N", "mps" or "cpu" (None: the best one here)."""
    if steps < 1 or warmup < 1:
        raise MeasureError(
            f"--steps must be at least 1 and --warmup at least 1 (the first step creates the "
            f"optimizer state), got steps={steps}, warmup={warmup}"
        )
    check_runnable(spec.lora)
    backend = backend or backend_for(device)
    build_program(spec, "meta")  # NB: imports the model's modules before the baseline
    free_at_start = backend.free_memory()
    backend.start()
    failure = None
    try:
        rig, trainable = device_rig(spec, backend.device)
        batch = rig.program.make_batch(backend.device, True)
    except Exception as exc:
        failure = setup_failure(exc, backend, free_at_start)
    if failure is not None:
        raise failure
    model = rig.program.model
    parameter_bytes = unique_bytes(list(model.parameters()))

    phases: list[PhaseMemory] = []
    reserved_peaks: list[int] = []
    state: dict[str, Any] = {"phase": Phase.SETUP, "iteration": 0, "before_forward": None}
    captured: dict[str, int | None] = {"activation": None, "grad": None}

    def mark(phase: Phase) -> None:
        allocated, reserved, used = backend.take_peaks()
        if reserved is not None:
            reserved_peaks.append(reserved)
        phases.append(
            PhaseMemory(
                iteration=state["iteration"],
                phase=state["phase"],
                peak_allocated_bytes=allocated,
                peak_used_bytes=used,
            )
        )
        first = state["iteration"] == 0
        if first and state["phase"] is Phase.FORWARD and phase is Phase.BACKWARD:
            now = backend.allocated()
            if now is not None and state["before_forward"] is not None:
                captured["activation"] = now - state["before_forward"]
        if first and phase is Phase.OPTIMIZER:
            captured["grad"] = unique_bytes([p.grad for p in trainable if p.grad is not None])
        if phase is Phase.FORWARD and state["phase"] is not Phase.FORWARD:
            state["before_forward"] = backend.allocated()
        state["phase"] = phase

    backend.synchronize()
    mark(Phase.SETUP)
    times: list[float] = []
    interrupted = False
    tracker = ModuleTracker(model)
    try:
        for i in range(warmup + steps):
            state["iteration"] = i
            start = time.perf_counter()
            run_iteration(rig, batch, mark)
            backend.synchronize()
            if i >= warmup:
                times.append(time.perf_counter() - start)
            mark(Phase.SETUP)
            if i == 0:
                tracker.remove()
    except KeyboardInterrupt:
        if state["iteration"] == 0:
            raise
        interrupted = True
    except Exception as exc:
        # NB: raised after the handler, so that the error does not keep the failed step's
        # frames (and their tensors) alive as its __context__
        failure = _failure(exc, spec, backend, state, tracker.current, free_at_start)
    finally:
        tracker.remove()
    if failure is not None:
        raise failure
    reserved_now = backend.reserved()
    _, _, used_now = backend.take_peaks()
    optimizer_bytes = optimizer_state_bytes(rig.optimizer, backend.device)
    peak_used = max([p.peak_used_bytes or 0 for p in phases] + [used_now or 0])
    peak_reserved = max(reserved_peaks) if reserved_peaks else None
    if backend.kind == "cuda" and peak_reserved is not None and reserved_now is not None:
        needed = peak_reserved + max(0, (used_now or 0) - reserved_now)
    else:
        needed = peak_used
    return Measured(
        device_name=backend.name(),
        kind=backend.kind,
        warmup=warmup,
        steps=len(times),
        interrupted=interrupted,
        micro_batch=spec.batch,
        grad_accum=spec.grad_accum,
        tokens_per_sample=rig.program.tokens_per_sample,
        peak_allocated_bytes=max(
            (p.peak_allocated_bytes for p in phases if p.peak_allocated_bytes is not None),
            default=None,
        ),
        peak_reserved_bytes=peak_reserved,
        peak_used_bytes=peak_used,
        device_needed_bytes=needed,
        used_method=getattr(backend, "used_method", "") or _USED_METHOD[backend.kind],
        baseline_used_bytes=backend.baseline_used(),
        total_memory_bytes=backend.total_memory(),
        free_at_start_bytes=free_at_start,
        parameter_bytes=parameter_bytes,
        gradient_bytes=captured["grad"],
        optimizer_state_bytes=optimizer_bytes,
        activation_bytes=captured["activation"],
        phases=tuple(p for p in phases if p.phase is not Phase.SETUP),
        step_seconds=tuple(times),
        versions=backend.versions(),
    )


_USED_METHOD = {
    "cuda": "cudaMemGetInfo",
    "mps": "torch.mps.driver_allocated_memory at phase boundaries",
    "cpu": "resident set increase (VmHWM on Linux, ru_maxrss elsewhere)",
}


def first_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message (300 characters at most)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


def setup_failure(exc: Exception, backend: Backend, free_at_start: int | None) -> MeasureError:
    """One line for an error while building the model on the device and making its batch."""
    if isinstance(exc, MeasureError):
        return exc
    if is_out_of_memory(exc):
        free = "" if free_at_start is None else f" ({free_at_start / GiB:.2f} GiB was free)"
        return MeasureError(
            f"out of memory on {backend.name()} while moving the model to the device{free}: "
            "its weights alone do not fit; see `trainfit plan` for what does"
        )
    return MeasureError(f"the model could not be set up on {backend.name()}: {first_line(exc)}")


def _failure(
    exc: BaseException,
    spec: TrainSpec,
    backend: Backend,
    state: dict[str, Any],
    module: str | None,
    free_at_start: int | None,
) -> MeasureError:
    """One line for a step that raised: out of memory, or the model's own error."""
    phase: Phase = state["phase"]
    where = f"step {state['iteration'] + 1}"
    if phase is Phase.FORWARD and module is not None:
        where += f" (in module {module})"
    if is_out_of_memory(exc):
        total = backend.total_memory()
        free = "" if free_at_start is None else f"; {free_at_start / GiB:.2f} GiB was free"
        of = "" if total is None else f" of {total / GiB:.2f} GiB"
        return MeasureError(
            f"out of memory on {backend.name()} in the {phase.value} pass of {where} at "
            f"micro-batch {spec.batch}"
            f"{free}{of} at the start; find what fits with `trainfit measure --max-batch` "
            "or `trainfit plan`"
        )
    return MeasureError(
        f"the model failed its own {phase.value} pass at {where}: {first_line(exc)}"
    )
