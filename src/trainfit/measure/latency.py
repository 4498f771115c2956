"""Inference latency on the local device: warm-up, then timed forward passes, synchronised.

`measure_latency(spec, batches=(1, 32))` builds the spec's model on the local device in
evaluation mode, and for each batch runs `warmup` untimed then `runs` timed forward passes
under `torch.inference_mode()` and the spec's autocast (pure-bf16 casts the model). Each run
is timed alone: the device is synchronised before the clock starts and after the pass, so a
figure is the full latency of one request of that batch, not a pipelined throughput. The
forward is the model's with its loss (what `trainfit.models` builds for the task): for a
language model, logits over the vocabulary at every position, as in scoring; generation's
per-token decode is not this.

Percentiles are the inclusive method of `statistics.quantiles` over the timed runs.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from trainfit.errors import MeasureError
from trainfit.measure.backend import Backend, backend_for, is_out_of_memory
from trainfit.measure.steps import first_line, setup_failure
from trainfit.models.source import build_program
from trainfit.progress import Activity, Part, tell
from trainfit.spec import Precision, TrainSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class Latency:
    """Timed forward passes at one batch."""

    batch: int
    runs: int
    seconds: tuple[float, ...]

    def percentile(self, q: int) -> float:
        """The q-th percentile in seconds (1..99)."""
        if len(self.seconds) == 1:
            return self.seconds[0]
        return statistics.quantiles(self.seconds, n=100, method="inclusive")[q - 1]

    @property
    def p50(self) -> float:
        return self.percentile(50)

    @property
    def p95(self) -> float:
        return self.percentile(95)

    @property
    def p99(self) -> float:
        return self.percentile(99)

    @property
    def samples_per_second(self) -> float:
        return self.batch / self.p50

    def to_dict(self) -> dict[str, object]:
        return {
            "batch": self.batch,
            "runs": self.runs,
            "p50_ms": self.p50 * 1e3,
            "p95_ms": self.p95 * 1e3,
            "p99_ms": self.p99 * 1e3,
            "mean_ms": statistics.fmean(self.seconds) * 1e3,
            "min_ms": min(self.seconds) * 1e3,
            "max_ms": max(self.seconds) * 1e3,
            "samples_per_second": self.samples_per_second,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class LatencyTable:
    """Latency of one model at several batches on one device."""

    device_name: str
    precision: str
    warmup: int
    rows: tuple[Latency, ...]
    interrupted: bool = False
    versions: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "device": self.device_name,
            "precision": self.precision,
            "warmup": self.warmup,
            "interrupted": self.interrupted,
            "rows": [r.to_dict() for r in self.rows],
            "versions": self.versions,
        }


def measure_latency(
    spec: TrainSpec | None = None,
    *,
    sample: Any = None,
    batches: tuple[int, ...] = (1,),
    warmup: int = 10,
    runs: int = 100,
    device: str | None = None,
    backend: Backend | None = None,
    **fields: Any,
) -> LatencyTable:
    """p50/p95/p99 of one forward pass of `spec`'s model at each batch (see the module).

    Without a TrainSpec, its fields as keyword arguments, as `estimate` takes them: a live
    `nn.Module` with its `sample` batch, `measure_latency(model=net, sample=x, device="cpu")`
    (`device` is the local device; a copy of the module, weights included, is run).
    """
    from trainfit.models.live import given_spec

    with given_spec("measure_latency", spec, fields, sample, weights=True) as given:
        return _measure_latency(given, batches, warmup, runs, device, backend)


def _measure_latency(
    spec: TrainSpec,
    batches: tuple[int, ...],
    warmup: int,
    runs: int,
    device: str | None,
    backend: Backend | None,
) -> LatencyTable:
    problems = [f"batch {b} is not a positive number" for b in batches if b < 1]
    if runs < 2:
        problems.append(f"--runs must be at least 2 for percentiles, got {runs}")
    if warmup < 1:
        problems.append(f"--warmup must be at least 1, got {warmup}")
    if problems:
        raise MeasureError("; ".join(problems))
    backend = backend or backend_for(device)
    free_at_start = backend.free_memory()
    failure = None
    tell(Part.MEASURE, Activity.BUILD.value)
    try:
        program = build_program(spec, "cpu")
        dtype = torch.bfloat16 if spec.precision is Precision.PURE_BF16 else None
        model = program.model.to(device=backend.device, dtype=dtype).eval()
    except Exception as exc:
        failure = setup_failure(exc, backend, free_at_start)
    if failure is not None:
        raise failure
    autocast_dtype = spec.precision.autocast_dtype
    rows: list[Latency] = []
    interrupted = False
    for b in sorted(set(batches)):
        times: list[float] = []
        tell(Part.MEASURE, Activity.LATENCY.value, batch=b)
        try:
            batch = build_program(dataclasses.replace(spec, batch=b), "meta").make_batch(
                backend.device, True
            )
            enabled = autocast_dtype is not None
            cast = torch.autocast(backend.kind.value, dtype=autocast_dtype, enabled=enabled)
            with torch.inference_mode(), cast:
                for i in range(warmup + runs):
                    backend.synchronize()
                    start = time.perf_counter()
                    program.compute_loss(model, batch)
                    backend.synchronize()
                    if i >= warmup:
                        times.append(time.perf_counter() - start)
        except KeyboardInterrupt:
            interrupted = True
        except Exception as exc:
            failure = MeasureError(
                f"out of memory on {backend.name()} running inference at batch {b}: try a "
                "smaller --latency-batch"
                if is_out_of_memory(exc)
                else f"the model failed its own forward pass at batch {b}: {first_line(exc)}"
            )
        if failure is not None:
            raise failure
        if len(times) >= 2:
            rows.append(Latency(batch=b, runs=len(times), seconds=tuple(times)))
        if interrupted:
            break
    backend.release()
    return LatencyTable(
        device_name=backend.name(),
        precision=spec.precision.value,
        warmup=warmup,
        rows=tuple(rows),
        interrupted=interrupted,
        versions=backend.versions(),
    )
