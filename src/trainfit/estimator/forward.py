"""`estimate_forward()`: the device memory and latency of one no_grad forward of a plain module
(a model that does not generate: a classifier, a regressor, an encoder), and `estimate_serving()`,
which picks it or `estimate_inference()` (generation) per model.

Memory: the weights and the forward's live tensors from a no_grad trace (`trace.forward`)
replayed through the device's allocator (CUDA's caching allocator, or the MPS heap allocator),
plus the runtime context (CUDA), as `estimate()` does for a training step. Time: the forward's
ops on the step-time model (`timing.step.step_time` with no backward and no optimizer: per-op
roofline with the calibrated efficiencies, plus the host's cost to issue each op).

Known limitations:
- the weights stay fp32 and fp16/bf16 is autocast (as the training trace runs); int8/int4 are
  modelled for causal LMs only (`trainfit.estimator.generation`);
- a forward is one request's latency on an idle device: no batching server, no data transfer
  from the host, no Python pre- or post-processing (feature extraction, decoding);
- Apple GPUs: the efficiencies are an NVIDIA GPU's (as for training).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainfit.errors import SpecError, TrainfitError, check_argument
from trainfit.estimator.generation import InferenceEstimate, estimate_inference
from trainfit.estimator.labels import FigureLabel, How
from trainfit.estimator.storage import InferencePrecision
from trainfit.hardware.catalog import Device, DeviceKind, device_names, get_device
from trainfit.models.live_names import model_label
from trainfit.provenance import Provenance
from trainfit.spec import Precision, TrainSpec, parse_enum
from trainfit.timing.basis import Basis, TimeNote
from trainfit.trace.target import Target
from trainfit.training import Phase

_AUTOCAST = {
    InferencePrecision.FP32: Precision.FP32,
    InferencePrecision.FP16: Precision.FP16,
    InferencePrecision.BF16: Precision.BF16,
}
"""The training precision (autocast dtype; none for fp32) a plain module's forward runs at."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ForwardEstimate:
    """Memory and latency of one no_grad forward on one device at one batch and precision."""

    model: str
    """What the model was named by (a live model by its class: `Net (live module)`)."""
    device: Device
    """The catalog row estimated for."""
    precision: InferencePrecision
    """The autocast dtype (weights stay fp32)."""
    batch: int
    """Samples in the forward."""
    device_memory_needed_bytes: int
    """Peak reserved + runtime context (0 on an Apple GPU, as for training)."""
    peak_allocated_bytes: int
    """Largest total of live tensors (allocator-rounded)."""
    fits: bool
    """Whether device_memory_needed fits the device's memory."""
    seconds: float
    """The forward's latency: the longer of the host's issue time and the device's time."""
    host_bound_share: float
    """Share of the latency the device waits for the host."""
    compute_bound_share: float
    """Share of the latency in kernels bound by arithmetic."""
    memory_bound_share: float
    """Share of the latency in kernels bound by memory traffic."""
    flops: int
    """FLOPs of the traced forward."""
    labels: dict[str, FigureLabel]
    """How each figure was obtained."""
    basis: Basis
    """Where the latency comes from (`labels["latency"]` says how it was obtained)."""
    notes: tuple[TimeNote, ...] = field(default=())
    """Caveats of this estimate."""

    @property
    def bound(self) -> str:
        """ "host", "device" (arithmetic) or "bandwidth": what the latency mostly waits on."""
        shares = {
            "host": self.host_bound_share,
            "device": self.compute_bound_share,
            "bandwidth": self.memory_bound_share,
        }
        return max(shares, key=lambda k: shares[k])


def estimate_forward(
    spec: TrainSpec | None = None,
    *,
    batch: int | None = None,
    precision: InferencePrecision | str = InferencePrecision.BF16,
    device: str | Device = "h100",
    sample: Any = None,
    **fields: Any,
) -> ForwardEstimate:
    """Predict memory and latency of one `torch.no_grad()` forward of `spec`'s model (its
    inputs, sequence length and loss as for training) at `batch` samples (default 1) on
    `device`. Or TrainSpec fields as keyword arguments, as `estimate` takes them: a live
    `nn.Module` with its `sample` batch, whose rows are then the default batch
    (`estimate_forward(model=net, sample=x, device="rtx-4060")`)."""
    from trainfit.models.live import given_spec

    with given_spec("estimate_forward", spec, fields, sample) as given:
        rows = batch if batch is not None else given.batch if spec is None else 1
        return _estimate_forward(given, rows, precision, device)


def _estimate_forward(
    spec: TrainSpec, batch: int, precision: InferencePrecision | str, device: str | Device
) -> ForwardEstimate:
    from trainfit.estimator.step import gpu_memory
    from trainfit.timing.constants import calibration
    from trainfit.timing.missing import RateMissing
    from trainfit.timing.step import step_time
    from trainfit.trace.forward import trace_forward

    found = device if isinstance(device, Device) else get_device(device)
    precision = parse_enum(InferencePrecision, "inference precision", precision)
    problems = []
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        problems.append(f"batch must be a positive integer, got {batch!r}")
    if precision not in _AUTOCAST:
        problems.append(
            f"{precision.value} weights are modelled for causal LMs only; a plain module's "
            "forward is estimated at fp32, or fp16 or bf16 autocast"
        )
    if found.kind not in (DeviceKind.CUDA, DeviceKind.MPS):
        problems.append(
            f"a forward is estimated for GPUs; {found.name!r} is of kind '{found.kind}': "
            "choose a GPU such as rtx-4060 or m4-pro-16gb"
        )
    if problems:
        raise SpecError(problems)
    one = dataclasses.replace(
        spec, batch=batch, grad_accum=1, precision=_AUTOCAST[precision], device=found.name
    )
    traced = trace_forward(one, Target.of(found))
    replayed, context = gpu_memory(traced.step, one, found)
    needed = replayed.peak_reserved_bytes + context
    cal = calibration()
    try:
        timed = step_time(traced.costs, one, found, cal=cal)
    except RateMissing as exc:
        raise TrainfitError(
            f"no {precision.value} rate for {found.name} in the catalog: {exc}"
        ) from None
    labels = {
        "memory": FigureLabel(
            Provenance.SIMULATED,
            How.MPS_FORWARD_MEMORY if found.kind is DeviceKind.MPS else How.FORWARD_MEMORY,
        ),
        "latency": FigureLabel(Provenance.MODELLED, How.FORWARD_LATENCY),
    }
    return ForwardEstimate(
        model=model_label(spec.model),
        device=found,
        precision=precision,
        batch=batch,
        device_memory_needed_bytes=needed,
        peak_allocated_bytes=replayed.peak_allocated_bytes,
        fits=needed <= found.memory_bytes,
        seconds=timed.seconds,
        host_bound_share=timed.host_bound_share,
        compute_bound_share=timed.compute_bound_share,
        memory_bound_share=timed.memory_bound_share,
        flops=traced.costs.flops(Phase.FORWARD),
        labels=labels,
        basis=timed.basis,
        notes=timed.notes,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class OffCuda:
    """Generation on a device that is not a CUDA GPU: not estimated."""

    device: str
    kind: DeviceKind


@dataclass(frozen=True, kw_only=True, slots=True)
class Fp32Generation:
    """fp32 generation: not modelled (the KV cache and decode are 16-bit)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class QuantizedForward:
    """int8 or int4 weights for a plain module's forward: modelled for causal LMs only."""

    precision: InferencePrecision


@dataclass(frozen=True, kw_only=True, slots=True)
class OffGpu:
    """A plain module's forward on a device that is not a GPU: not estimated."""

    device: str
    kind: DeviceKind


@dataclass(frozen=True, kw_only=True, slots=True)
class Failed:
    """The estimate raised a TrainfitError: its message, the error's own line."""

    message: str


Unserved = OffCuda | Fp32Generation | QuantizedForward | OffGpu | Failed
"""Why a (device, precision, batch) is not estimated (words: `trainfit.report.document.serving`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServingRefusal:
    """A (device, precision, batch) that trainfit does not estimate, and why."""

    model: str
    device: str
    precision: str
    batch: int
    why: tuple[Unserved, ...]


ServingResult = InferenceEstimate | ForwardEstimate | ServingRefusal


def is_generative(spec: TrainSpec) -> bool:
    """Whether `spec`'s model is a causal LM (served with generate()) rather than a forward."""
    return _described(spec)[0]


def parameter_count(spec: TrainSpec) -> int:
    """All parameters of `spec`'s model (built on the meta device)."""
    return _described(spec)[1]


def _described(spec: TrainSpec) -> tuple[bool, int]:
    from trainfit.models.source import build_program

    program = build_program(dataclasses.replace(spec, batch=1), "meta")
    count = sum(p.numel() for p in program.model.parameters())
    return program.task == "causal-lm", count


def estimate_serving(
    spec: TrainSpec | None = None,
    *,
    devices: str | Sequence[str] | None = None,
    precisions: InferencePrecision | str | Sequence[InferencePrecision | str] | None = None,
    batches: int | Sequence[int] | None = None,
    context: int | None = None,
    new_tokens: int | None = None,
    sample: Any = None,
    **fields: Any,
) -> list[ServingResult]:
    """Every (device, precision, batch): greedy generation for a causal LM (needs `context`
    and `new_tokens`), one no_grad forward for any other model; a combination trainfit does
    not estimate (an Apple GPU for generation, int4 for a forward) is a ServingRefusal saying
    why, so that a report can show it rather than drop it. `devices`, `precisions` and
    `batches` (required) each take one value or a list. Or TrainSpec fields as keyword
    arguments, as `estimate` takes them: a live `nn.Module` with its `sample` (served as its
    forward, as a `pkg.module:factory` model is)."""
    from trainfit.models.live import given_spec

    own = ("devices", "precisions", "batches", "context", "new_tokens")
    with given_spec(
        "estimate_serving", spec, fields, sample,
        excluded=("device", "precision", "batch"), parameters=own,
    ) as given:  # fmt: skip
        for name, value in (("context", context), ("new_tokens", new_tokens)):
            if value is not None:
                check_argument("estimate_serving", name, value, int, "tokens, or None")
        return _estimate_serving(
            given, device_names(devices),  # type: ignore[arg-type]
            _listed("precisions", precisions, (str, InferencePrecision)),
            _listed("batches", batches, int), context, new_tokens,
        )  # fmt: skip


def _listed(name: str, value: object, kind: type | tuple[type, ...]) -> list[Any]:
    """`estimate_serving`'s argument `name`: one value of `kind` as a list of it, or a
    non-empty list of them; SpecError naming anything else."""

    def one(v: object) -> bool:
        return isinstance(v, kind) and not isinstance(v, bool)

    if one(value):
        return [value]
    listed = isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    if listed and value and all(one(v) for v in value):
        return list(value)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    wanted = " or ".join(k.__name__ for k in kinds)
    raise SpecError(
        [
            f"estimate_serving: {name} must be one {wanted} or a non-empty list of them, "
            f"got {value!r}"
        ]
    )


def _estimate_serving(
    spec: TrainSpec,
    devices: list[str],
    precisions: list[InferencePrecision | str],
    batches: list[int],
    context: int | None,
    new_tokens: int | None,
) -> list[ServingResult]:
    generative = is_generative(spec)
    if generative and (context is None or new_tokens is None):
        raise SpecError([f"{spec.model} generates text: give the inference context and new_tokens"])
    out: list[ServingResult] = []
    for name in devices:
        for p in precisions:
            for b in batches:
                try:
                    out.append(_serve(spec, name, p, b, generative, context, new_tokens))
                except TrainfitError as exc:
                    out.append(_refusal(spec, name, p, b, (Failed(message=str(exc)),)))
    return out


def _serve(
    spec: TrainSpec,
    device: str,
    precision: InferencePrecision | str,
    batch: int,
    generative: bool,
    context: int | None,
    new_tokens: int | None,
) -> ServingResult:
    """One (device, precision, batch): its estimate, or a refusal saying why."""
    why = unserved(generative, get_device(device), precision)
    if why:
        return _refusal(spec, device, precision, batch, why)
    if not generative:
        return estimate_forward(spec, batch=batch, precision=precision, device=device)
    assert context is not None and new_tokens is not None  # NB: estimate_serving checked
    return estimate_inference(
        spec.model,
        context=context,
        new_tokens=new_tokens,
        batch=batch,
        precision=precision,
        device=device,
    )


def _refusal(
    spec: TrainSpec,
    device: str,
    precision: InferencePrecision | str,
    batch: int,
    why: tuple[Unserved, ...],
) -> ServingRefusal:
    label = str(getattr(precision, "value", precision))
    return ServingRefusal(
        model=model_label(spec.model), device=device, precision=label, batch=batch, why=why
    )


def unserved(
    generative: bool, device: Device, precision: InferencePrecision | str
) -> tuple[Unserved, ...]:
    """Why generation (`generative`) or a plain module's forward at `precision` on `device` is
    not estimated: nothing when it is. NB: as `estimate_inference` checks them, generation
    names its device first and fp32 only on a CUDA GPU."""
    precision = parse_enum(InferencePrecision, "inference precision", precision)
    if generative:
        if device.kind is not DeviceKind.CUDA:
            return (OffCuda(device=device.name, kind=device.kind),)
        return (Fp32Generation(),) if precision is InferencePrecision.FP32 else ()
    why: list[Unserved] = []
    if precision not in _AUTOCAST:
        why.append(QuantizedForward(precision=precision))
    if device.kind not in (DeviceKind.CUDA, DeviceKind.MPS):
        why.append(OffGpu(device=device.name, kind=device.kind))
    return tuple(why)
