"""The traces one plan makes once and shares: per setting and kernel family, the batch
scaling, the one-sample trace, the replays; the parameter counts; the floor of a setting.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from trainfit.distributed.search import SharedTraces
from trainfit.errors import TraceError
from trainfit.estimator.scaling import PROBES, BatchScaling, scale_batch
from trainfit.estimator.step import gpu_fits, gpu_memory
from trainfit.hardware.catalog import Device, DeviceKind
from trainfit.memory.runtime import METAL_OTHER_FLOOR_BYTES, context_bytes, profile_of
from trainfit.memory.states import model_states, parameter_counts
from trainfit.spec import ReferenceKind, TrainSpec
from trainfit.trace.kernels.attention import kernel_family, traced_alike
from trainfit.trace.step import StepTrace, trace_step
from trainfit.trace.target import Target


@dataclass(kw_only=True, slots=True)
class TraceCache:
    """What one plan computes once: traces per setting and kernel family, parameter counts."""

    scalings: dict[tuple[object, ...], BatchScaling] = dataclasses.field(default_factory=dict)
    ones: dict[tuple[object, ...], StepTrace] = dataclasses.field(default_factory=dict)
    """Traces at one sample made by the one-sample check (kept by the scaling for batch 1,
    and copied from by the same setting with another optimizer)."""
    counts: tuple[int, int] | None = None


def trace_key(spec: TrainSpec, device: Device) -> tuple[object, ...]:
    """What a setting's traces depend on: the settings the plan varies, the kind of device and
    (CUDA) the kernel family."""
    return (
        spec.precision,
        spec.checkpointing,
        spec.optimizer,
        device.kind,
        kernel_family(device.compute_capability) if device.kind is DeviceKind.CUDA else (),
    )


def scaling_for(spec: TrainSpec, device: Device, cache: TraceCache) -> BatchScaling:
    """The memory-against-micro-batch scaling of `spec` on `device`, traced once per plan."""
    # NB: devices of one kernel family (the compute-capability thresholds attention kernels
    # depend on) trace the same step, so they share traces; the allocator replay, cuBLAS
    # workspace and runtime context are per device.
    key = trace_key(spec, device)
    found = cache.scalings.get(key) or _same_trace(spec, device, cache)
    if found is None:
        # NB: not probed at batch 1: some models take other code paths there (the line
        # through batches 1, 2 and 4 failed its check for a 7B Llama step)
        found = scale_batch(
            dataclasses.replace(spec, device=device.name),
            passes_from=other_optimizer(spec, device, cache),
        )
        if key in cache.ones:
            found.exact[1] = cache.ones[key]
    cache.scalings[key] = found
    if found.device.name != device.name:
        found = dataclasses.replace(
            found, device=device, spec=dataclasses.replace(found.spec, device=device.name)
        )
    return found


def traced(spec: TrainSpec, device: Device, cache: TraceCache) -> bool:
    """Whether the plan has a scaling of `spec` that `device` can use."""
    return trace_key(spec, device) in cache.scalings or _same_trace(spec, device, cache) is not None


def one_sample_over(spec: TrainSpec, device: Device, cache: TraceCache, budget: int) -> int | None:
    """Device memory one sample needs when it does not fit `budget`; None when it fits or the
    setting is already traced.

    NB: a setting that cannot run one sample costs one trace; one that can keeps the trace
    for its scaling's batch 1 (which the line through larger batches need not match: some
    models take other code paths there). A model that cannot train on one sample (BatchNorm)
    is traced at the scaling's base batch instead, and counts as not fitting one sample when
    that does not fit.
    """
    if traced(spec, device, cache):
        return None
    trace, at = _trace_at_one(spec, device, cache)
    if gpu_fits(trace, at, device, budget):
        return None
    result, context = gpu_memory(trace, at, device)
    return result.peak_reserved_bytes + context


def _passes_alike(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Whether two trace keys (`trace_key`) differ at most in the optimizer, so that their
    forward and backward passes are the same."""
    return a[:2] == b[:2] and a[3:] == b[3:]


def other_optimizer(spec: TrainSpec, device: Device, cache: TraceCache) -> BatchScaling | None:
    """A scaling of the same setting with another optimizer, whose forward and backward
    passes a trace of `spec` can copy (only the optimizer steps are then traced)."""
    key = trace_key(spec, device)
    for other, scaling in cache.scalings.items():
        if _passes_alike(other, key) and scaling.affine:
            return scaling
    return None


def _same_trace(spec: TrainSpec, device: Device, cache: TraceCache) -> BatchScaling | None:
    """A scaling of the same setting traced for another kernel family whose every attention
    call runs the same traced op on `device` (e.g. no dropout: Hopper's cuDNN attention and
    Ampere's flash attention trace alike)."""
    if device.kind is not DeviceKind.CUDA:
        return None
    mine = trace_key(spec, device)
    for key, scaling in cache.scalings.items():
        if key[:4] != mine[:4]:
            continue
        if traced_alike(scaling.base.attention_calls, key[4], mine[4]):  # type: ignore[arg-type]
            return scaling
    return None


def _trace_at_one(
    spec: TrainSpec, device: Device, cache: TraceCache
) -> tuple[StepTrace, TrainSpec]:
    """A trace of one sample of `spec` on `device` and its spec, kept in `cache.ones` for the
    setting's scaling and for copies of its passes; for a model that cannot train on one sample
    (BatchNorm), a trace at the scaling's base batch (not kept). TraceError when that fails
    too."""
    key = trace_key(spec, device)
    one = dataclasses.replace(spec, batch=1, device=device.name)
    if key in cache.scalings:
        return cache.scalings[key].trace_at(1), one
    if key not in cache.ones:
        source = next((t for k, t in cache.ones.items() if _passes_alike(k, key)), None)
        if source is None and (other := other_optimizer(spec, device, cache)) is not None:
            source = other.trace_at(1)
        try:
            cache.ones[key] = trace_step(one, target=Target.of(device), passes_from=source)
        except TraceError:  # NB: BatchNorm cannot train on one sample
            base = dataclasses.replace(spec, batch=PROBES[0], device=device.name)
            return trace_step(base, target=Target.of(device)), base
    return cache.ones[key], one


def needed_once(spec: TrainSpec, micro: int, device: Device, cache: TraceCache) -> int:
    """Device memory needed at one micro-batch: from a cached scaling, else one trace."""
    if traced(spec, device, cache):
        return scaling_for(spec, device, cache).needed_bytes(micro)
    at = dataclasses.replace(spec, batch=micro, device=device.name)
    source = other_optimizer(spec, device, cache)
    trace = trace_step(
        at,
        target=Target.of(device),
        passes_from=source.trace_at(micro) if source is not None else None,
    )
    result, context = gpu_memory(trace, at, device)
    return result.peak_reserved_bytes + context


def floor_bytes(spec: TrainSpec, device: Device, cache: TraceCache) -> int:
    """Device memory no micro-batch of `spec` can go under on `device` (model states plus the
    smallest runtime context): settings above the budget are skipped without a trace."""
    states = model_states(spec, counts(spec, cache))
    if device.kind is DeviceKind.MPS:
        return states.total() + METAL_OTHER_FLOOR_BYTES
    if device.kind is not DeviceKind.CUDA:
        return states.total()
    profile = profile_of(device)
    return states.total() + context_bytes(profile, uses_cublas=False, reduced_precision=False)


def shared_traces(spec: TrainSpec, cache: TraceCache) -> SharedTraces:
    """The plan's exact traces of `spec`'s optimizer (at one sample, at the scalings' base
    batch and their exact batches) for its multi-GPU plans to start from.

    NB: a multi-GPU plan traces its step at a micro-batch as the plan's settings are traced
    (`trace_key`: precision, checkpointing, optimizer, kind of device, kernel family; batch;
    accumulation 1), so a trace the plan made is the one it would make; lines through the
    probes (`BatchScaling.trace_at`) are not taken.
    """
    shared = SharedTraces()
    exact: list[tuple[tuple[object, ...], int, StepTrace]] = [
        (key, 1, trace) for key, trace in cache.ones.items()
    ]
    for key, scaling in cache.scalings.items():
        exact.append((key, scaling.spec.batch, scaling.base))
        exact += [(key, batch, trace) for batch, trace in scaling.exact.items()]
    for (precision, checkpointing, optimizer, kind, family), batch, trace in exact:
        if optimizer == spec.optimizer:
            shared.made[(kind, family, checkpointing, batch, precision)] = trace
    return shared


def counts(spec: TrainSpec, cache: TraceCache) -> tuple[int, int]:
    """All and trainable parameters of `spec`'s model, counted once per plan."""
    if cache.counts is None:
        cache.counts = parameter_counts(spec)
    return cache.counts


def model_parameters(spec: TrainSpec, cache: TraceCache) -> int:
    """The model's parameters, without a DPO reference copy (which the counts include, as its
    weights take memory)."""
    total = counts(spec, cache)[0]
    if spec.preference is not None and spec.reference is ReferenceKind.MODEL:
        return total // 2  # NB: the reference is a deep copy of the policy: as many elements
    return total
