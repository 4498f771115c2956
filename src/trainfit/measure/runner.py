"""Run N real training steps of a spec on a device and measure them.

This is the reference the accuracy benchmark compares estimates with, and what `trainfit
measure` (#5) builds on. The model is built on the CPU in fp32 and moved to the device (cast to
bf16 for pure-bf16), the default attention and optimizer settings are kept, the allocator is
left at its defaults and `empty_cache` is never called.
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import dataclass, field

import torch

from trainfit.errors import MeasureError
from trainfit.measure.backend import transformers_version
from trainfit.measure.steps import device_rig, optimizer_state_bytes, unique_bytes
from trainfit.spec import TrainSpec
from trainfit.training import (
    Phase,
    StepRig,
    run_iteration,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class PhasePeak:
    """The highest allocated memory within one phase of one iteration."""

    iteration: int
    phase: Phase
    peak_allocated_bytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Measurement:
    """What a real run of a spec used."""

    device_name: str
    """torch's name of the device, e.g. 'NVIDIA H100 80GB HBM3'."""
    steps: int
    peak_allocated_bytes: int
    """torch.cuda.max_memory_allocated over the run."""
    peak_reserved_bytes: int
    """torch.cuda.max_memory_reserved over the run."""
    device_used_bytes: int
    """total - free from cudaMemGetInfo after the steps: what the process holds on the card."""
    baseline_used_bytes: int
    """total - free before this process touched the device (other processes)."""
    parameter_bytes: int
    gradient_bytes: int
    """Bytes of .grad tensors after the last backward of the first iteration."""
    optimizer_state_bytes: int
    activation_bytes: int
    """Allocated after the first forward minus before it: what the forward keeps for backward."""
    phase_peaks: tuple[PhasePeak, ...]
    step_seconds: tuple[float, ...]
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def peak_phase(self) -> PhasePeak:
        """The phase holding the peak."""
        return max(self.phase_peaks, key=lambda p: p.peak_allocated_bytes)


def measure_cuda(spec: TrainSpec, steps: int = 3, device: str = "cuda") -> Measurement:
    """Run warm-up-free real steps of `spec` on a CUDA device; raise MeasureError without one."""
    dev = _cuda_device(device)
    free0, total = torch.cuda.mem_get_info(dev)
    baseline = total - free0
    rig, trainable = cuda_rig(spec, dev, build_on="cpu")
    program, optimizer = rig.program, rig.optimizer
    param_bytes = unique_bytes(list(program.model.parameters()))
    batch = program.make_batch(dev, True)

    phase_peaks: list[PhasePeak] = []
    state = {"phase": Phase.SETUP, "iteration": 0, "before_forward": 0}
    captured = {"activation": 0, "grad": 0}

    def mark(phase: Phase) -> None:
        peak = torch.cuda.max_memory_allocated(dev)
        phase_peaks.append(
            PhasePeak(iteration=state["iteration"], phase=state["phase"], peak_allocated_bytes=peak)
        )
        if state["iteration"] == 0 and state["phase"] is Phase.FORWARD and phase is Phase.BACKWARD:
            captured["activation"] = torch.cuda.memory_allocated(dev) - state["before_forward"]
        if state["iteration"] == 0 and phase is Phase.OPTIMIZER:
            grads = [p.grad for p in trainable if p.grad is not None]
            captured["grad"] = unique_bytes(grads)
        if phase is Phase.FORWARD and state["phase"] is not Phase.FORWARD:
            state["before_forward"] = torch.cuda.memory_allocated(dev)
        state["phase"] = phase
        # reset clears the reserved peak too: keep it ourselves first
        reserved_peaks.append(torch.cuda.max_memory_reserved(dev))
        torch.cuda.reset_peak_memory_stats(dev)

    reserved_peaks: list[int] = []
    torch.cuda.synchronize(dev)
    times: list[float] = []
    try:
        for i in range(steps):
            state["iteration"] = i
            start = time.perf_counter()
            run_iteration(rig, batch, mark)
            torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - start)
            mark(Phase.SETUP)
    except torch.OutOfMemoryError as exc:
        raise MeasureError(
            f"out of memory on {torch.cuda.get_device_name(dev)} at iteration {state['iteration']}"
            f" in the {state['phase'].value} phase"
        ) from exc
    reserved_peaks.append(torch.cuda.max_memory_reserved(dev))
    free1, _ = torch.cuda.mem_get_info(dev)
    opt_bytes = optimizer_state_bytes(optimizer, dev)
    return Measurement(
        device_name=torch.cuda.get_device_name(dev),
        steps=steps,
        peak_allocated_bytes=max(p.peak_allocated_bytes for p in phase_peaks),
        peak_reserved_bytes=max(reserved_peaks),
        device_used_bytes=total - free1,
        baseline_used_bytes=baseline,
        parameter_bytes=param_bytes,
        gradient_bytes=captured["grad"],
        optimizer_state_bytes=opt_bytes,
        activation_bytes=captured["activation"],
        phase_peaks=tuple(p for p in phase_peaks if p.phase is not Phase.SETUP),
        step_seconds=tuple(times),
        versions={
            "torch": torch.__version__,
            "cuda": str(torch.version.cuda),
            "transformers": transformers_version(),
        },
    )


def _cuda_device(device: str) -> torch.device:
    """The CUDA device `device` names, made current; MeasureError without one."""
    if not torch.cuda.is_available():
        raise MeasureError("no CUDA device is visible here: run on a machine with an NVIDIA GPU")
    dev = torch.device(device)
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.set_device(dev)
    return dev


def cuda_rig(
    spec: TrainSpec, dev: torch.device, build_on: str = "cpu"
) -> tuple[StepRig, list[torch.nn.Parameter]]:
    """`spec`'s rig on CUDA device `dev` (`trainfit.measure.steps.device_rig`)."""
    return device_rig(spec, dev, build_on)


@dataclass(frozen=True, kw_only=True, slots=True)
class StepTiming:
    """Device time of real training steps, split by phase (CUDA events at the phase marks)."""

    device_name: str
    warmup: int
    steps: int
    step_seconds: tuple[float, ...]
    """Wall time of each timed optimizer step, the device synchronised at its end."""
    forward_seconds: tuple[float, ...]
    """Per timed step, the device time from the first forward mark to the backward mark,
    summed over micro-batches."""
    backward_seconds: tuple[float, ...]
    optimizer_seconds: tuple[float, ...]
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def median_step_seconds(self) -> float:
        return statistics.median(self.step_seconds)

    def to_dict(self) -> dict[str, object]:
        return {
            "device_name": self.device_name,
            "warmup": self.warmup,
            "steps": self.steps,
            "step_seconds": list(self.step_seconds),
            "forward_seconds": list(self.forward_seconds),
            "backward_seconds": list(self.backward_seconds),
            "optimizer_seconds": list(self.optimizer_seconds),
            "median_step_seconds": self.median_step_seconds,
            "versions": self.versions,
        }


def time_cuda(
    spec: TrainSpec, warmup: int = 3, steps: int = 10, device: str = "cuda"
) -> StepTiming:
    """Time `warmup` + `steps` real optimizer steps of `spec` on a CUDA device."""
    dev = _cuda_device(device)
    rig, _ = cuda_rig(spec, dev, build_on="device")
    batch = rig.program.make_batch(dev, True)
    marks: list[tuple[Phase, torch.cuda.Event]] = []

    def mark(phase: Phase) -> None:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        marks.append((phase, event))

    walls: list[float] = []
    split: list[tuple[float, float, float]] = []
    try:
        for i in range(warmup + steps):
            marks.clear()
            torch.cuda.synchronize(dev)
            start = time.perf_counter()
            mark(Phase.SETUP)
            run_iteration(rig, batch, mark)
            mark(Phase.SETUP)
            torch.cuda.synchronize(dev)
            wall = time.perf_counter() - start
            if i < warmup:
                continue
            walls.append(wall)
            totals = {Phase.FORWARD: 0.0, Phase.BACKWARD: 0.0, Phase.OPTIMIZER: 0.0}
            for (phase, begin), (_, end) in itertools.pairwise(marks):
                if phase in totals:
                    totals[phase] += begin.elapsed_time(end) / 1000.0
            split.append((totals[Phase.FORWARD], totals[Phase.BACKWARD], totals[Phase.OPTIMIZER]))
    except torch.OutOfMemoryError as exc:
        raise MeasureError(
            f"out of memory on {torch.cuda.get_device_name(dev)} while timing steps"
        ) from exc
    return StepTiming(
        device_name=torch.cuda.get_device_name(dev),
        warmup=warmup,
        steps=steps,
        step_seconds=tuple(walls),
        forward_seconds=tuple(f for f, _, _ in split),
        backward_seconds=tuple(b for _, b, _ in split),
        optimizer_seconds=tuple(o for _, _, o in split),
        versions={
            "torch": torch.__version__,
            "cuda": str(torch.version.cuda),
            "transformers": transformers_version(),
        },
    )
