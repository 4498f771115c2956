"""Run N real training steps of a spec on the CPU and measure the resident memory they add.

The reference for the CPU target (`benchmarks/accuracy_cpu/`). Call it in a fresh process: the
resident set of a process that has already trained something says little.

How it measures:
- *baseline*: first the model is built once on the meta device and dropped, so that torch,
  transformers and the model's modules are imported; then, after `gc.collect()`, the current
  RSS is read. That is the baseline, taken right before the model is built on the CPU.
- *peak*: on Linux, the kernel's RSS high-water mark (VmHWM, which `ru_maxrss` also reports)
  is reset to the current RSS by writing 5 to /proc/self/clear_refs at the baseline and at
  every phase boundary, and read at the next one: exact to the page, per phase, with no
  sampling. Where that is not possible (macOS, or a kernel that refuses), the peak is
  `ru_maxrss` over the whole run, which is exact only if nothing before the baseline pushed
  it higher; the result says which method ran (`rss_method`).
- *peak allocated* (optional, `allocations=True`): PyTorch's profiler with `profile_memory`
  records every CPU allocator allocation and free from before the model is built; the running
  sum's maximum is the peak. The profiler's own buffers inflate RSS, so measure RSS and
  allocations in separate processes.

The step is `trainfit.training`'s, the one the estimator traces: the model is built on the CPU
in fp32 with random weights (cast to bf16 for pure-bf16), PyTorch's default optimizer path,
`torch.autocast("cpu", dtype)` for fp16/bf16 (with `torch.amp.GradScaler("cpu")` for fp16).
"""

from __future__ import annotations

import gc
import os
import platform
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from trainfit.measure.backend import transformers_version
from trainfit.measure.marks import unique_bytes
from trainfit.measure.rss import HighWater, current_rss_bytes, maxrss_bytes
from trainfit.measure.steps import device_rig
from trainfit.models.source import build_program
from trainfit.spec import TrainSpec
from trainfit.training import (
    Phase,
    StepRig,
    apply_settings,
    run_iteration,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class RssPeak:
    """The highest RSS increase within one phase of one iteration (build: the model's build)."""

    iteration: int
    phase: Phase
    rss_increase_bytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuMeasurement:
    """What a real CPU run of a spec added to the process's resident memory."""

    host: str
    threads: int
    """torch.get_num_threads() during the run."""
    steps: int
    baseline_rss_bytes: int
    """RSS right before the model was built (imports done)."""
    peak_rss_increase_bytes: int
    """Peak RSS over the run minus the baseline: the CPU's *memory needed*."""
    final_rss_increase_bytes: int
    """RSS after the last step minus the baseline."""
    rss_method: str
    """"VmHWM reset per phase" (exact) or "ru_maxrss" (exact only if the baseline was the
    process's high-water mark)."""
    peak_allocated_bytes: int | None
    """Peak of the CPU allocator's live bytes (profiler), or None when not measured."""
    parameter_bytes: int
    phase_peaks: tuple[RssPeak, ...]
    step_seconds: tuple[float, ...]
    versions: dict[str, str] = field(default_factory=dict)


def measure_cpu(spec: TrainSpec, steps: int = 3, allocations: bool = False) -> CpuMeasurement:
    """Run `steps` real steps of `spec` on the CPU; measure RSS (or allocations) as above."""
    warm = build_program(spec, "meta")  # imports the model's modules before the baseline
    apply_settings(warm, spec)
    del warm
    gc.collect()
    profiler = _start_profiler() if allocations else None
    baseline = current_rss_bytes()
    high = HighWater()
    if baseline is None:
        baseline = maxrss_bytes()  # NB: macOS: the high-water mark stands in for current RSS
    peaks: list[RssPeak] = []
    state: dict[str, Any] = {"phase": Phase.SETUP, "iteration": -1}

    def mark(phase: Phase) -> None:
        peaks.append(
            RssPeak(
                iteration=state["iteration"],
                phase=state["phase"],
                rss_increase_bytes=high.take() - baseline,
            )
        )
        state["phase"] = phase

    rig, batch, param_bytes = _build(spec)
    mark(Phase.SETUP)
    times: list[float] = []
    for i in range(steps):
        state["iteration"] = i
        start = time.perf_counter()
        run_iteration(rig, batch, mark)
        times.append(time.perf_counter() - start)
        mark(Phase.SETUP)
    final = current_rss_bytes()
    peak_allocated = _stop_profiler(profiler) if profiler is not None else None
    return CpuMeasurement(
        host=f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        threads=torch.get_num_threads(),
        steps=steps,
        baseline_rss_bytes=baseline,
        peak_rss_increase_bytes=max(p.rss_increase_bytes for p in peaks),
        final_rss_increase_bytes=(final - baseline) if final is not None else 0,
        rss_method="VmHWM reset per phase" if high.resettable else "ru_maxrss",
        peak_allocated_bytes=peak_allocated,
        parameter_bytes=param_bytes,
        phase_peaks=tuple(peaks),
        step_seconds=tuple(times),
        versions={
            "torch": torch.__version__,
            "transformers": transformers_version(),
            "python": platform.python_version(),
            "libc": " ".join(platform.libc_ver()),
        },
    )


def _build(spec: TrainSpec) -> tuple[StepRig, dict[str, torch.Tensor], int]:
    rig, _ = device_rig(spec, torch.device("cpu"))
    params = unique_bytes(list(rig.program.model.parameters()))
    return rig, rig.program.make_batch(torch.device("cpu"), True), params


def _start_profiler() -> Any:
    from torch.profiler import ProfilerActivity, profile

    profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    profiler.__enter__()
    return profiler


def _stop_profiler(profiler: Any) -> int:
    profiler.__exit__(None, None, None)
    events = [
        (e.start_ns(), e.nbytes())
        for e in profiler.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch._C._autograd.DeviceType.CPU
    ]
    events.sort()
    current = peak = 0
    for _, nbytes in events:
        current += nbytes
        peak = max(peak, current)
    return peak
