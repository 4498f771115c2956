"""`estimate_inference()`: the device memory and latency of greedy generation with a causal LM.

Memory: the weights at the chosen precision, the KV cache, and the prefill's activations, from
a traced prefill and first decode step (`trace.generation`) replayed through the caching
allocator with the cache's growth over the remaining tokens appended (one `torch.cat` per layer
per token, as transformers' DynamicCache grows), plus the cuBLAS workspace and the runtime
context (`memory.runtime`). Time: the prefill from its traced ops on the step-time model
(`timing.step`: per-op roofline with the H100-calibrated efficiencies, plus the host's cost to
issue each op); each decode step as the longer of the host's issue time for its ops and the
device time of its ops, the latter adjusted for the KV cache's average length over the
generation and for the bytes the weights take at the precision.

Weight precisions (int8 and int4 are *modelled*, never measured: the GPU box has no
bitsandbytes):
- fp16 / bf16: 2 bytes per parameter and buffer;
- int8: LLM.int8()-like (bitsandbytes `load_in_8bit`): every Linear (and GPT-2's Conv1D)
  weight but the output head at 1 byte per element plus one fp32 scale per output row;
  embeddings, norms, biases and the head stay 16-bit;
- int4: GPTQ/AWQ-like weight-only int4: the same layers at 0.5 byte per element plus a 16-bit
  scale and a 16-bit zero point per group of 128 input elements; the rest 16-bit.

Known limitations:
- activations of int8/int4 are the 16-bit trace's: the kernels' dequantization buffers
  (bitsandbytes' int8 outlier matmul, for one) are not modelled, and their decode time is the
  16-bit one less the bytes saved (a weight-only kernel reading its bytes at the calibrated
  bandwidth; bitsandbytes' kernels are slower than that);
- generate()'s Python overhead per token is not modelled (its tensor ops are), nor
  torch.compile or CUDA graphs (transformers' eager loop only);
- CUDA GPUs only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import torch
from torch import nn

from trainfit.errors import SpecError, TrainfitError, check_argument
from trainfit.estimator.labels import (
    BandwidthLabel,
    FigureLabel,
    How,
    Label,
    PrefillLabel,
    WeightsLabel,
)
from trainfit.estimator.storage import InferencePrecision, tensor_bytes
from trainfit.hardware.catalog import Device, DeviceKind, device_names, get_device
from trainfit.memory.allocator import CachingAllocator
from trainfit.memory.replay import replay
from trainfit.memory.runtime import context_bytes, cublas_workspace_bytes, profile_of
from trainfit.models.live_names import is_live, model_label
from trainfit.models.program import Description
from trainfit.provenance import Provenance
from trainfit.spec import Precision, TrainSpec, parse_enum
from trainfit.timing.constants import Calibration, calibration
from trainfit.timing.host import host_costs
from trainfit.timing.missing import RateMissing
from trainfit.timing.step import Rates, step_time
from trainfit.trace.costs import OpKind
from trainfit.trace.generation import CacheLayer, GenerationTrace, trace_generation
from trainfit.trace.recorder import Event
from trainfit.trace.step import Category, StepTrace
from trainfit.trace.target import Target
from trainfit.training import Phase


@dataclass(frozen=True, kw_only=True, slots=True)
class InferenceMemory:
    """Device memory at the generation's peak, by what it holds."""

    weights: int
    """Parameters and buffers at the precision (see the module docstring)."""
    kv_cache: int
    """The cache after the last decode step: context + new_tokens - 1 positions (generate()
    never feeds its last token back)."""
    activations: int
    """Everything else live at the allocated peak (the prefill's activations and logits)."""
    workspaces: int
    """cuBLAS workspace."""
    allocator_overhead: int
    """Peak reserved minus peak allocated (the growing cache's freed blocks included)."""
    runtime_context: int
    """CUDA context, kernels and library handles outside the allocator (memory/runtime.py)."""

    def total(self) -> int:
        return (
            self.weights
            + self.kv_cache
            + self.activations
            + self.workspaces
            + self.allocator_overhead
            + self.runtime_context
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class QuantizedModelled:
    """int8 or int4 weights: modelled, not measured; the activations and kernels are the bf16
    trace's, and the dequantization buffers are not counted."""

    precision: InferencePrecision


@dataclass(frozen=True, kw_only=True, slots=True)
class AllLogits:
    """The model's forward has no `logits_to_keep`: prefill computes every position's logits."""


GenerationNote = QuantizedModelled | AllLogits
"""A caveat of an InferenceEstimate, a typed fact (words: `trainfit.report.inference`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class InferenceEstimate:
    """Memory and latency of greedy generation on one device at one batch and precision."""

    model: str
    """What the model was named by (catalog name, directory or hub id; a live model by its
    class: `GPT2LMHeadModel (live module)`)."""
    device: Device
    """The catalog row estimated for."""
    precision: InferencePrecision
    """How the weights are stored."""
    batch: int
    """Sequences generated together."""
    context: int
    """Prompt tokens per sequence."""
    new_tokens: int
    """Tokens generated per sequence."""
    memory: InferenceMemory
    """Device memory at the allocated peak, by what it holds."""
    device_memory_needed_bytes: int
    """What must be free on the device: peak reserved + runtime context."""
    peak_allocated_bytes: int
    """Largest total of live tensors (allocator-rounded) over prefill and decode."""
    peak_reserved_bytes: int
    """Largest total the caching allocator holds from the device (simulated)."""
    fits: bool
    """Whether device_memory_needed fits the device's memory."""
    peak_at: str
    """"prefill" or "decode": where the allocated peak is."""
    prefill_seconds: float
    """The prompt's forward, to the first token."""
    decode_seconds_per_token: float
    """One decode step (all sequences of the batch), averaged over the generation."""
    decode_host_seconds: float
    """The host's time to issue one decode step's ops (the floor of a host-bound step)."""
    bandwidth_bound_seconds_per_token: float
    """Bytes read per decode step (weights + average KV cache) at the calibrated bandwidth."""
    prefill_flops: int
    """FLOPs of the traced prefill forward."""
    decode_bytes_per_token: int
    """Weights plus the average KV cache, read once per decode step."""
    model_description: Description
    """Where the model came from and its family."""
    labels: dict[str, Label]
    """How each figure was obtained ("traced", "simulated", "modelled", ...)."""
    notes: tuple[GenerationNote, ...] = field(default=())
    """Caveats of this estimate (words: `trainfit.report.inference.generation_note_text`)."""

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens per second over the batch during decode."""
        return self.batch / self.decode_seconds_per_token

    @property
    def total_seconds(self) -> float:
        """Prefill (first token) plus new_tokens - 1 decode steps."""
        return self.prefill_seconds + (self.new_tokens - 1) * self.decode_seconds_per_token


@lru_cache(maxsize=16)
def _traced(
    model: str, context: int, new_tokens: int, batch: int, target: Target, dtype: torch.dtype
) -> GenerationTrace:
    # NB: devices of one compute capability, and precisions of one compute dtype, share a trace
    return trace_generation(
        model, context=context, new_tokens=new_tokens, batch=batch, target=target, dtype=dtype
    )


def _check(model: str, context: int, new_tokens: int, batch: int, device: Device) -> None:
    problems = []
    for name, value in (("context", context), ("new_tokens", new_tokens), ("batch", batch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(f"{name} must be a positive integer, got {value!r}")
    if device.kind is not DeviceKind.CUDA:
        problems.append(
            f"inference is estimated for CUDA GPUs; {device.name!r} is of kind "
            f"'{device.kind}': choose a GPU such as h100 or rtx-4060"
        )
    if problems:
        raise SpecError(problems)


def _growth(trace: GenerationTrace, steps: int, start_key: int) -> list[Event]:
    """The cache's `torch.cat` per layer for `steps` more decode steps: a new K (then V) one
    position longer, then the old one freed (a sliding layer stops growing at its window)."""
    events: list[Event] = []
    keys = {layer: list(layer.key_keys) for layer in trace.cache}
    key = start_key
    for step in range(steps):
        for layer in trace.cache:
            tokens = layer.tokens + step + 1
            if layer.window is not None:
                tokens = min(tokens, layer.window)
            half = layer.bytes_per_token * tokens // 2
            for i in (0, 1):
                events.append(Event(key, half, True, Phase.FORWARD, 2, "DynamicCache cat"))
                events.append(Event(keys[layer][i], 0, False, Phase.FORWARD, 2, "free"))
                keys[layer][i] = key
                key += 1
    return events


def estimate_inference(
    model: str | nn.Module,
    *,
    context: int,
    new_tokens: int,
    batch: int = 1,
    precision: InferencePrecision | str = InferencePrecision.BF16,
    device: str | Device = "h100",
) -> InferenceEstimate:
    """Predict memory and latency of `model.generate()` (greedy, KV cache) on `device` (a
    catalog name, or a `Device` row). `model` is a catalog name, a model directory or a hub
    id, or a live transformers causal LM (an `nn.Module`: a meta copy of it is traced, no
    sample needed, and the result names it by its class)."""
    if isinstance(model, nn.Module):
        from trainfit.models.live import registered_copy

        with registered_copy(model) as path:
            return estimate_inference(
                path, context=context, new_tokens=new_tokens, batch=batch,
                precision=precision, device=device,
            )  # fmt: skip
    hint = "a catalog name, a model directory or hub id (str), or a live causal LM (nn.Module)"
    check_argument("estimate_inference", "model", model, (str, nn.Module), hint)
    found = device if isinstance(device, Device) else get_device(device)
    _check(model, context, new_tokens, batch, found)
    precision = parse_enum(InferencePrecision, "inference precision", precision)
    if precision is InferencePrecision.FP32:
        raise SpecError(
            [
                "fp32 generation is not modelled (the KV cache and decode are 16-bit): choose "
                "fp16, bf16, int8 or int4; fp32 is for a plain module's forward"
            ]
        )
    target, dtype = Target.of(found), precision.compute_dtype
    if is_live(model):  # NB: not cached: its import path is registered for this call only
        trace = trace_generation(
            model, context=context, new_tokens=new_tokens, batch=batch, target=target, dtype=dtype
        )
    else:
        trace = _traced(model, context, new_tokens, batch, target, dtype)
    peak = _peak_memory(trace, found, precision, new_tokens)
    cal = calibration()
    try:
        time = _generation_time(model, trace, found, precision, batch, new_tokens, peak, cal)
    except RateMissing as exc:
        raise TrainfitError(
            f"no {precision.value} rate for {found.name} in the catalog: {exc}"
        ) from None
    return InferenceEstimate(
        model=model_label(model),
        device=found,
        precision=precision,
        batch=batch,
        context=context,
        new_tokens=new_tokens,
        memory=peak.memory,
        device_memory_needed_bytes=peak.needed,
        peak_allocated_bytes=peak.allocated,
        peak_reserved_bytes=peak.reserved,
        fits=peak.needed <= found.memory_bytes,
        peak_at=peak.at,
        prefill_seconds=time.prefill_seconds,
        decode_seconds_per_token=time.per_token,
        decode_host_seconds=time.host_seconds,
        bandwidth_bound_seconds_per_token=time.read / time.bandwidth,
        prefill_flops=trace.prefill.flops(Phase.FORWARD),
        decode_bytes_per_token=time.read,
        model_description=trace.description,
        labels=_labels(trace, found, precision, peak.context_measured, cal),
        notes=_notes(trace, precision),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Peak:
    """The generation's memory: the replayed prefill and decode at their allocated peak."""

    memory: InferenceMemory
    needed: int
    """Peak reserved + runtime context."""
    allocated: int
    reserved: int
    at: str
    """"prefill" or "decode"."""
    sixteen: int
    """The weights' bytes at 16 bit (as the traced decode step read them)."""
    context_measured: bool
    """Whether the runtime context is a measured constant of the device's profile."""


def _peak_memory(
    trace: GenerationTrace, found: Device, precision: InferencePrecision, new_tokens: int
) -> _Peak:
    """Replay the prefill and `new_tokens` decode steps through the caching allocator, with
    the weights at `precision`."""
    sizes_of = {
        key: tensor_bytes(owner, name, tensor, precision, key in trace.head_keys)
        for key, (owner, name, tensor) in trace.weights.items()
    }
    weights = sum(sizes_of.values())
    sixteen = sum(_sixteen(tensor) for _, _, tensor in trace.weights.values())
    next_key = max((e.key for e in trace.events), default=0) + 1
    growth = _growth(trace, max(0, new_tokens - 2), next_key)
    # NB: one new token is the prefill's: generate() runs no decode step
    events = trace.events[: trace.prefill_end] if new_tokens == 1 else trace.events + growth
    sizes = [sizes_of.get(e.key, e.nbytes) if e.alloc else 0 for e in events]
    step = StepTrace(
        events=events,
        workspaces=trace.workspaces,
        categories={key: Category.PARAMETERS for key in trace.weights},
        description=trace.description,
        loss_note="",
        assumptions=[],
        attention={},
        parameter_count=0,
        trainable_count=0,
        ops=trace.ops,
    )
    workspace = cublas_workspace_bytes(found.compute_capability)
    result = replay(step, workspace, None, sizes, allocator=CachingAllocator)
    profile = profile_of(found)
    context_held = context_bytes(
        profile, uses_cublas=True, reduced_precision=True, backward_cublas=False
    )
    cache_keys = trace.cache_keys | {e.key for e in growth if e.alloc}
    kv_at_peak, peak_index = _cache_at_peak(events, sizes, cache_keys)
    kv_final = sum(
        _final_tokens(layer, new_tokens) * layer.bytes_per_token for layer in trace.cache
    )
    live = result.live_at_peak
    workspaces = live.get("workspaces", 0)
    other = result.peak_allocated_bytes - live.get(Category.PARAMETERS.value, 0) - workspaces
    memory = InferenceMemory(
        weights=weights,
        kv_cache=kv_final,
        activations=max(0, other - kv_at_peak),
        workspaces=workspaces,
        allocator_overhead=result.peak_reserved_bytes - result.peak_allocated_bytes,
        runtime_context=context_held,
    )
    return _Peak(
        memory=memory,
        needed=result.peak_reserved_bytes + context_held,
        allocated=result.peak_allocated_bytes,
        reserved=result.peak_reserved_bytes,
        at="prefill" if peak_index < trace.prefill_end else "decode",
        sixteen=sixteen,
        context_measured=profile.measured,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Time:
    """The generation's latency: the prefill, and one decode step averaged over the run."""

    prefill_seconds: float
    per_token: float
    host_seconds: float
    """The host's issue time of one decode step, its syncs included."""
    bandwidth: float
    """Datasheet bandwidth x calibrated memory efficiency, bytes per second."""
    read: int
    """Weights plus the average KV cache, read once per decode step."""


def _generation_time(
    model: str,
    trace: GenerationTrace,
    found: Device,
    precision: InferencePrecision,
    batch: int,
    new_tokens: int,
    peak: _Peak,
    cal: Calibration,
) -> _Time:
    """The traced prefill and decode step timed on `found`, the decode step adjusted for the
    average cache and the stored weight bytes."""
    weights, kv_final = peak.memory.weights, peak.memory.kv_cache
    # NB: the step-time model reads the spec's precision (16-bit ops) and batch only
    spec = TrainSpec(
        model=model,
        batch=batch,
        precision=Precision.FP16 if precision is InferencePrecision.FP16 else Precision.BF16,
    )
    prefill = step_time(trace.prefill, spec, found, cal=cal).forward_seconds
    rates = Rates(found, spec, cal)
    ops = trace.decode.forward
    table = trace.decode.table
    device_s = sum(rates.time(table[i], Phase.FORWARD).seconds for i in ops)
    hosts = host_costs(cal, [op.kind for op in table], Phase.FORWARD, cal.host_op_seconds)
    host_s = sum(hosts[i] for i in ops)
    bandwidth = rates.bandwidth  # datasheet bandwidth x calibrated memory efficiency
    kv_first = sum(
        _final_tokens(layer, min(2, new_tokens)) * layer.bytes_per_token for layer in trace.cache
    )
    # NB: the growing cache's average over the decode steps, first and last included
    kv_average = (kv_first + kv_final) // 2
    # NB: the traced decode step read the weights in 16 bit and a cache of context + 1
    # positions; the average step reads the cache at its mean length and the stored weights
    adjust = (kv_average - kv_first + weights - peak.sixteen) / bandwidth
    syncs = sum(1 for i in ops if table[i].kind is OpKind.SYNC)
    # NB: each sync (the stop check, the mask check) waits for the device: the host cannot
    # run ahead into the next token, so per token the longer of the two plus the syncs
    per_token = max(host_s, device_s + adjust) + syncs * cal.sync_seconds
    return _Time(
        prefill_seconds=prefill,
        per_token=per_token,
        host_seconds=host_s + syncs * cal.sync_seconds,
        bandwidth=bandwidth,
        read=weights + kv_average,
    )


def _labels(
    trace: GenerationTrace,
    found: Device,
    precision: InferencePrecision,
    context_measured: bool,
    cal: Calibration,
) -> dict[str, Label]:
    """How each figure of the estimate was obtained."""
    prefill = How.PREFILL_LAST_LOGITS if trace.logits_to_keep else How.PREFILL_ALL_LOGITS
    return {
        "weights": WeightsLabel(precision=precision),
        "kv_cache": FigureLabel(Provenance.TRACED, How.KV_CACHE),
        "activations": FigureLabel(Provenance.TRACED, prefill),
        "peak_reserved_bytes": FigureLabel(Provenance.SIMULATED, How.CACHING_REPLAY),
        "runtime_context": (
            FigureLabel(Provenance.MEASURED, How.MEASURED_CONSTANT)
            if context_measured
            else FigureLabel(Provenance.MODELLED, How.H100)
        ),
        "prefill": PrefillLabel(
            calibrated_here=found.name == cal.catalog_row, calibration_device=cal.device
        ),
        "decode": FigureLabel(Provenance.MODELLED, How.DECODE),
        "bandwidth_efficiency": BandwidthLabel(
            efficiency=cal.memory_efficiency,
            calibration_device=cal.device,
            calibration_date=cal.date,
        ),
    }


def _notes(trace: GenerationTrace, precision: InferencePrecision) -> tuple[GenerationNote, ...]:
    """The estimate's caveats."""
    notes: list[GenerationNote] = []
    if precision in (InferencePrecision.INT8, InferencePrecision.INT4):
        notes.append(QuantizedModelled(precision=precision))
    if not trace.logits_to_keep:
        notes.append(AllLogits())
    return tuple(notes)


def _sixteen(tensor: torch.Tensor) -> int:
    return tensor.numel() * 2 if tensor.is_floating_point() else tensor.nbytes


def _final_tokens(layer: CacheLayer, new_tokens: int) -> int:
    """Positions a layer holds after the last decode step (context + new_tokens - 1; the
    traced layer holds context + 1). NB: a sliding layer's storage is the full `torch.cat`
    result (its window) of which the cache keeps a view of window - 1 positions."""
    tokens = layer.tokens + new_tokens - 2
    return min(tokens, layer.window) if layer.window else tokens


def _cache_at_peak(
    events: list[Event], sizes: list[int], cache: frozenset[int] | set[int]
) -> tuple[int, int]:
    """(cache bytes live, event index) at the largest allocated total (unrounded sizes)."""
    total = best = kv = kv_best = index = 0
    size_of: dict[int, int] = {}
    for i, event in enumerate(events):
        if event.alloc:
            size_of[event.key] = sizes[i]
            total += sizes[i]
            if event.key in cache:
                kv += sizes[i]
            if total > best:
                best, kv_best, index = total, kv, i
        elif event.key in size_of:
            freed = size_of.pop(event.key)
            total -= freed
            if event.key in cache:
                kv -= freed
    return kv_best, index


def estimate_inference_table(
    model: str,
    *,
    context: int,
    new_tokens: int,
    batches: Sequence[int],
    precisions: Sequence[InferencePrecision | str],
    devices: str | Sequence[str],
) -> list[InferenceEstimate]:
    """Every (device, precision, batch) estimate, in that order (traces are shared)."""
    devices = device_names(devices)
    return [
        estimate_inference(
            model, context=context, new_tokens=new_tokens, batch=b, precision=p, device=d
        )
        for d in devices
        for p in precisions
        for b in batches
    ]
