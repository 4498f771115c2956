"""How long one training step takes on a device: a per-op roofline over the traced step.

Each op the tracer saw (trainfit.trace.costs) takes on the device the longer of its compute
time (FLOPs at the peak rate of its precision times a calibrated efficiency, plus a fixed
time per matmul) and its memory time (bytes at the datasheet bandwidth times a calibrated
efficiency), plus the shortest time a kernel takes. The host issues every op (views
included) at a calibrated cost per op; the device runs each kernel once the host has issued
it and the previous kernel is done, and a value read back to the host (`.item()`) makes the
host wait. A training loop does not wait for the device between steps, so the host issues a
step while the device still runs the last: the step time is that pipeline's steady period (the
busier side's work per step), or, for a step timed alone, from an idle device to its end.

The constants come from single-kernel measurements on one GPU (`calibration.json`, made by
benchmarks/timing/calibrate.py); on other GPUs the efficiencies are assumed the same (but a
family's own large-matmul ones, timing.families) and the rates are the catalog's; every
kernel time is multiplied by the device family's factor, fitted on published training
measurements (`families.json`, made by benchmarks/external/fit.py; Hopper GPUs and devices
of no family keep factor 1), and the kernels of an op class by the family's factor for it
(timing.families): such figures are labelled "modelled", and their basis names the factors.
A measured step on one device scales to another by the ratio of the two modelled times
("calibrated").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from trainfit.errors import SpecError
from trainfit.hardware.catalog import Device, DeviceKind, get_device
from trainfit.optim import run_path
from trainfit.spec import Precision, TrainSpec
from trainfit.timing.basis import (
    Basis,
    BorrowedFit,
    FamilyFactors,
    FittedKernel,
    MeasuredBasis,
    RooflineBasis,
    TimeNote,
)
from trainfit.timing.checks import blind_notes, family_notes, without_blind_check
from trainfit.timing.constants import (
    Calibration,
    FamilyFit,
    calibration,
    family_fits,
)
from trainfit.timing.families import OP_CLASSES, class_factors, matmul_efficiency, scale_of
from trainfit.timing.host import step_host_costs
from trainfit.timing.kernels import (
    attention_factor,
    interpolate_curve,
    rnn_layer_seconds,
    rnn_step_seconds,
)
from trainfit.timing.missing import NoBandwidth, NoRate, RateMissing
from trainfit.trace.costs import OpCost, OpKind, StepCosts
from trainfit.trace.target import Target
from trainfit.training import Phase


class TimeLabel(str, Enum):
    """How a time was obtained. Its text is its value, as in the JSON."""

    MODELLED = "modelled"
    """From the step-time model (per-op roofline and host issue time)."""
    CALIBRATED = "calibrated"
    """The model scaled by a step measured on this or another device."""
    MEASURED = "measured"
    """A step measured on this device with this setting."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True, kw_only=True, slots=True)
class StepTime:
    """Predicted time of one optimizer step (all its micro-batches) on one device."""

    device: str
    micro_batch: int
    grad_accum: int
    seconds: float
    """One optimizer step: grad_accum forward/backward passes, then the optimizer."""
    forward_seconds: float
    """Device time of one micro-batch's forward (and loss)."""
    backward_seconds: float
    optimizer_seconds: float
    samples_per_second: float
    tokens_per_second: float | None
    flops_per_step: int
    compute_bound_share: float
    """Share of the step's device time in kernels bound by arithmetic."""
    memory_bound_share: float
    """Share in kernels bound by memory traffic (and the shortest kernel time)."""
    host_bound_share: float
    """Share of the step the device waits for the host to issue work."""
    label: TimeLabel
    """Modelled, calibrated (scaled from a measured step) or measured."""
    basis: Basis
    """Where the figure comes from."""
    notes: tuple[TimeNote, ...] = field(default=())
    """What the figure can be trusted to."""


def _rate(device: Device, precision: str) -> float:
    """Peak FLOP/s of `device` at `precision`, from the catalog; RateMissing where the catalog
    has none (never another precision's rate in its place)."""
    figure = device.tflops.get(precision)
    if figure is not None and figure.value:
        return float(figure.value) * 1e12
    raise RateMissing(NoRate(device=device.display, precision=precision))


def _precision(op: OpCost, spec: TrainSpec, device: Device) -> str:
    """The rate an op computes at on `device`: its dtype, fp32 matmuls as tf32 when the spec
    allows it, fp32 convolutions and recurrent layers as tf32 (cuDNN's default) where the
    device has tensor cores for it."""
    if op.dtype in ("bf16", "fp16"):
        return op.dtype
    tf32 = device.has_tf32
    if op.kind is OpKind.MATMUL and spec.precision is Precision.TF32 and tf32:
        return "tf32"
    if op.kind in (OpKind.CONV, OpKind.RNN) and tf32:
        return "tf32"
    return "fp32"


BORROWED_FROM = "bf16"
"""The precision whose fitted convolution and attention efficiencies time those kernels at a
precision the calibration has none for (fp32 convolutions on a GPU without TF32, fp32
attention): bf16's are measured for every kernel class. NB: the kernels run at their own
precision's peak rate; the step time names each such borrowing (`BorrowedFit`)."""

_CUDNN_PASS = {False: "forward", True: "backward"}
"""A cuDNN rule's factor by `OpCost.gradient`, not by phase: a recomputed forward's is forward."""

_Fit = TypeVar("_Fit")


@dataclass(frozen=True, slots=True)
class _OpTime:
    seconds: float
    compute_bound: bool


class Rates:
    """Per-op device time on one device under one calibration."""

    def __init__(self, device: Device, spec: TrainSpec, cal: Calibration) -> None:
        if not device.memory_bandwidth_gbs.value:
            raise RateMissing(NoBandwidth(device=device.display))
        self.device = device
        self.spec = spec
        self.cal = cal
        bandwidth = float(device.memory_bandwidth_gbs.value) * 1e9
        self.raw_bandwidth = bandwidth
        self.bandwidth = bandwidth * cal.memory_efficiency
        self.elementwise = bandwidth * cal.elementwise_efficiency
        self._peaks: dict[str, float] = {}
        self._apple_fixed: float | None = None
        self.family_matmul = matmul_efficiency(device.name)
        self.cudnn_rules = device.kind is DeviceKind.CUDA and device.name not in family_fits()
        """Whether the kernel rules read off the calibration GPU's cuDNN (a convolution's channel
        curve, an fp16 batch norm's share of the fp32 time, fused attention's curves where the
        device's SMs are known) apply: on a CUDA device whose kernel times are the
        calibration's unscaled. A family's factors were fitted on public runs with the model
        before those rules (families.json), so its devices keep that model. NB: a refit
        bringing a device into a family times its rows with the rules; a step measured with
        them and scaled (`scaled`) to a device without loses their slowdown."""
        sms = device.sm_count.value if self.cudnn_rules and cal.attention_curve else None
        self.attention_sms = int(sms) if sms else 0
        self.borrowed: dict[tuple[FittedKernel, str], None] = {}
        """The (kernel, precision) pairs timed with `BORROWED_FROM`'s fit, in order."""

    def fitted(self, kernel: FittedKernel, fits: Mapping[str, _Fit], precision: str) -> _Fit:
        """The calibration's fit of `kernel` at `precision`; where it has none, the fit at
        `BORROWED_FROM`, recorded in `borrowed`."""
        fit = fits.get(precision)
        if fit is not None:
            return fit
        self.borrowed[(kernel, precision)] = None
        return fits[BORROWED_FROM]

    def borrowed_notes(self) -> list[TimeNote]:
        """What the step's timing borrowed (`BorrowedFit`), one note per kernel and precision."""
        return [
            BorrowedFit(
                kernel=kernel,
                precision=precision,
                borrowed=BORROWED_FROM,
                calibration_device=self.cal.device,
            )
            for kernel, precision in self.borrowed
        ]

    def peak(self, precision: str) -> float:
        if precision not in self._peaks:
            self._peaks[precision] = _rate(self.device, precision)
        return self._peaks[precision]

    def matmul_fixed(self, precision: str) -> float:
        """Seconds a matmul takes beside its FLOPs' time: the calibration GPU's, per precision.

        A time, not FLOPs: on the calibration GPU it is 2.7-4.9 us in every precision while
        the rates differ 15x (benchmarks/timing/results/gemm_fixed_h100.json), so a
        card whose TF32 rate is its FP32 rate (GeForce) pays what it pays at FP32, not 10x.
        Unscaled on other NVIDIA cards (their boost clocks are within 0.85-1.3x of the
        calibration GPU's). On an Apple GPU, which runs every precision on the same ALUs, it is
        the calibration GPU's FP32 seconds times its FP32 rate over the device's: the form the
        Apple family's factors were fitted with."""
        if self.device.kind is not DeviceKind.MPS:
            return self.cal.matmul_fixed_seconds[precision]
        if self._apple_fixed is None:
            reference = _rate(get_device(self.cal.catalog_row), "fp32")
            self._apple_fixed = (
                self.cal.matmul_fixed_seconds["fp32"] * reference / self.peak("fp32")
            )
        return self._apple_fixed

    def matmul_efficiency(self, precision: str) -> float:
        """A large matmul's efficiency at `precision`: the device family's, read off published
        GEMMs (timing.families.MatmulEfficiency), else the calibration GPU's; an unaligned
        matmul's scales with it."""
        own = self.family_matmul.get(precision) if self.family_matmul else None
        return self.cal.matmul_efficiency[precision] if own is None else own

    def time(self, op: OpCost, phase: Phase) -> _OpTime:
        cal = self.cal
        if op.kind in (OpKind.HOST, OpKind.SYNC) or op.kernels == 0:
            return _OpTime(0.0, False)
        if op.kind is OpKind.RNN:
            which = "backward" if phase is Phase.BACKWARD else "forward"
            steps = op.kernels * rnn_step_seconds(cal, op.detail, which, op.dtype, gates=op.gates)
            steps += op.layers * rnn_layer_seconds(cal, op.detail, which, op.dtype, gates=op.gates)
            return _OpTime(max(steps, op.bytes / self.bandwidth), True)
        if op.kind is OpKind.FOREACH:
            memory = (
                op.bytes / self.bandwidth
                + cal.kernel_seconds * op.kernels
                + cal.foreach_tensor_seconds * op.detail
            )
            return _OpTime(memory, False)
        if op.kind is OpKind.NORM and self.device.kind is DeviceKind.MPS:
            # NB: the channel curve below is cuDNN's and PyTorch's CUDA kernels (their
            # efficiency falls to 6% of bandwidth at 16 channels); MPS normalises through
            # MPSGraph reductions, timed here as any bandwidth-bound kernel (the CIFAR ResNets'
            # 16-64-channel BatchNorms were otherwise modelled 2x too slow on an M1 Pro)
            return _OpTime(op.bytes / self.elementwise + cal.kernel_seconds, False)
        if op.kind is OpKind.NORM:
            # NB: PyTorch's kernel for bf16, cuDNN's for fp32 and fp16 (as profiled on CUDA);
            # an fp16 one takes the measured share of the same batch norm's fp32 time (its
            # bytes doubled), not half of it as its bytes would say
            curve = cal.norm_curve["bf16" if op.dtype == "bf16" else "fp32"]
            efficiency = interpolate_curve(curve, op.detail)
            moved = float(op.bytes)
            if op.dtype == "fp16" and self.cudnn_rules:
                moved *= 2 * cal.norm_fp16_time_over_fp32[_CUDNN_PASS[op.gradient]]
            return _OpTime(moved / (self.raw_bandwidth * efficiency) + cal.kernel_seconds, False)
        memory = op.bytes / self.elementwise + cal.elementwise_fixed_seconds
        if op.kind is OpKind.MEMORY or op.flops == 0:
            return _OpTime(memory, False)
        precision = _precision(op, self.spec, self.device)
        peak = self.peak(precision)
        if op.kind is OpKind.CONV:
            fit = self.fitted(FittedKernel.CONV, cal.conv_fit, precision)
            compute = op.flops / (peak * fit["compute_efficiency"])
            moving = op.bytes / (self.raw_bandwidth * fit["memory_efficiency"])
            seconds = compute + moving + fit["fixed_seconds"]
            group = cal.conv_channel_curve.get("tf32" if precision in ("tf32", "fp32") else "half")
            if op.detail and group and self.cudnn_rules:
                # NB: extrapolated to one-gradient backwards, bf16 (fp16's), 1-D and 3-D (2-D's)
                seconds *= interpolate_curve(group[_CUDNN_PASS[op.gradient]], op.detail)
            return _OpTime(seconds, compute >= moving)
        if op.kind is OpKind.ATTENTION:
            efficiency = self.fitted(FittedKernel.ATTENTION, cal.attention_efficiency, precision)
            fixed = 0.0
        else:
            aligned = self.matmul_efficiency(precision)
            efficiency = (
                cal.matmul_unaligned_efficiency[precision]
                * aligned
                / cal.matmul_efficiency[precision]
                if op.detail
                else aligned
            )
            # NB: cuBLAS's slow kernels for an unaligned dimension take their fixed part in the
            # proportion of their throughput (as the calibration was validated); on the
            # calibration GPU this is the FLOPs form's time exactly
            fixed = self.matmul_fixed(precision) * aligned / efficiency
        compute = op.flops / (peak * efficiency) + fixed + cal.kernel_seconds * op.kernels
        seconds = max(compute, memory)
        if op.attention and self.attention_sms:
            seconds *= attention_factor(cal, op.attention, op.dtype, self.attention_sms)
        return _OpTime(seconds, compute >= memory)


@dataclass(slots=True)
class _Clock:
    host: float = 0.0
    device: float = 0.0
    compute: float = 0.0
    memory: float = 0.0

    def run(
        self,
        order: tuple[int, ...],
        times: list[_OpTime],
        hosts: list[float],
        kinds: list[OpKind],
        sync: float,
    ) -> None:
        # NB: the clocks and enum members held in locals for the loop (a plan runs it over
        # tens of thousands of ops); the same sums in the same order
        host, device, compute, memory = self.host, self.device, self.compute, self.memory
        rnn, sync_kind = OpKind.RNN, OpKind.SYNC
        for index in order:
            kind = kinds[index]
            if kind is rnn:
                # NB: a cuDNN recurrent call waits for the device before its own set-up (the
                # loop-timed GRU at hidden 256 ran its calls' fixed cost in series with the
                # device's work, as the single calls timed alone did)
                host = max(host, device)
            host += hosts[index]
            if kind is sync_kind:
                host = max(host, device) + sync
                continue
            t = times[index]
            seconds = t.seconds
            if seconds:
                device = max(device, host) + seconds
                if t.compute_bound:
                    compute += seconds
                else:
                    memory += seconds
        self.host, self.device, self.compute, self.memory = host, device, compute, memory

    def repeat(self, passes: list[tuple[float, float, float, float]], more: int) -> None:
        """Advance by `more` further passes, each moving the clocks as the second of the two
        simulated `passes` (host, device, compute, memory after each) did."""
        (h1, d1, c1, m1), (h2, d2, c2, m2) = passes
        self.host += (h2 - h1) * more
        self.device += (d2 - d1) * more
        self.compute += (c2 - c1) * more
        self.memory += (m2 - m1) * more


class _Run:
    """One optimizer step's passes and optimizer, advanced on a clock."""

    def __init__(
        self,
        costs: StepCosts,
        spec: TrainSpec,
        kinds: list[OpKind],
        times: dict[Phase, list[_OpTime]],
        hosts: dict[Phase, list[float]],
        cal: Calibration,
    ) -> None:
        self.costs, self.spec, self.kinds, self.cal = costs, spec, kinds, cal
        self.times, self.hosts = times, hosts
        self.marks: list[tuple[float, float]] = []
        self.before = 0.0

    def step(self, clock: _Clock) -> None:
        costs, kinds, cal, times, hosts = self.costs, self.kinds, self.cal, self.times, self.hosts
        clock.host += cal.host_fit.step_seconds
        self.marks = []
        passes: list[tuple[float, float, float, float]] = []
        # NB: every micro-batch pass runs the same ops; after two, each further pass moves the
        # host and device clocks by the second one's amounts (the simulation is shift-invariant),
        # so a step of many accumulation steps costs two simulated passes
        for _ in range(min(self.spec.grad_accum, 2)):
            start = clock.device
            clock.run(
                costs.forward, times[Phase.FORWARD], hosts[Phase.FORWARD], kinds, cal.sync_seconds
            )
            middle = max(clock.device, start)
            clock.host += cal.host_fit.pass_seconds
            clock.run(
                costs.backward,
                times[Phase.BACKWARD],
                hosts[Phase.BACKWARD],
                kinds,
                cal.sync_seconds,
            )
            self.marks.append((middle - start, clock.device - middle))
            passes.append((clock.host, clock.device, clock.compute, clock.memory))
        if self.spec.grad_accum > 2:
            clock.repeat(passes, self.spec.grad_accum - 2)
        self.before = clock.device
        clock.run(
            costs.optimizer,
            times[Phase.OPTIMIZER],
            hosts[Phase.OPTIMIZER],
            kinds,
            cal.sync_seconds,
        )


def _op_times(
    rates: Rates, costs: StepCosts, factor: float, classes: dict[str, float] | None = None
) -> dict[Phase, list[_OpTime]]:
    """Each op's device time per phase, multiplied by `factor` (a device family's fit) and
    by its op class's factor in `classes` (timing.families; 1 where absent)."""
    times = {
        phase: [rates.time(op, phase) for op in costs.table]
        for phase in (Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER)
    }
    if factor == 1.0 and not classes:
        return times
    scales = [factor * scale_of(classes or {}, op.kind) for op in costs.table]
    return {
        phase: [_OpTime(t.seconds * s, t.compute_bound) for t, s in zip(ts, scales, strict=True)]
        for phase, ts in times.items()
    }


def _basis(device: Device, cal: Calibration, fit: FamilyFit | None) -> RooflineBasis:
    """Where a modelled step time comes from."""
    family = None
    if fit:
        factors = class_factors(device.name)
        family = FamilyFactors(
            family=fit.family,
            factor=fit.device_time_factor,
            class_factors=tuple((c, factors[c]) for c in OP_CLASSES if c in factors),
            rows=fit.rows,
            date=fit.date,
        )
    return RooflineBasis(
        device=device.display,
        calibrated_here=device.name == cal.catalog_row,
        calibration_device=cal.device,
        calibration_date=cal.date,
        family=family,
    )


def step_time(
    costs: StepCosts,
    spec: TrainSpec,
    device: Device,
    tokens_per_sample: int | None = None,
    trainable_tensors: int = 0,
    cal: Calibration | None = None,
    device_time_factor: float | None = None,
    op_class_factors: dict[str, float] | None = None,
    synced_loop: bool = False,
) -> StepTime:
    """The modelled time of one optimizer step of `spec` (micro-batch `spec.batch`, times
    `spec.grad_accum`) on `device`. Raises RateMissing when the catalog lacks a rate.

    The step is one of a training loop that does not wait for the device between steps (its
    steady period); `synced_loop` times one step alone, the device idle at its start and
    synchronised at its end (a loop that syncs after every step).

    Device kernel times are multiplied by `device_time_factor`; None takes the device
    family's factors fitted on public measurements (families.json, timing.families), 1 where
    none; an explicit factor goes with `op_class_factors` (class -> factor) instead."""
    given = (device_time_factor, op_class_factors)
    shipped = (cal is None or cal is calibration()) and given == (None, None)
    cal = cal or calibration()
    rates = Rates(device, spec, cal)
    kinds = [op.kind for op in costs.table]
    fit = family_fits().get(device.name) if device_time_factor is None else None
    factor = fit.device_time_factor if fit else (device_time_factor or 1.0)
    times = _op_times(rates, costs, factor, class_factors(device.name) if fit else op_class_factors)
    issued = sum(1 for i in costs.optimizer if kinds[i] is not OpKind.MODULE)
    # NB: the paths' host costs were measured on CUDA; elsewhere the calibrated cost stands
    path = (
        run_path(spec.optimizer, spec.optimizer_path, Target.of(device).rules(None).foreach)
        if device.kind is DeviceKind.CUDA
        else None
    )
    per_op = {
        Phase.FORWARD: 0.0,
        Phase.BACKWARD: 0.0,
        Phase.OPTIMIZER: cal.optimizer_host(spec, trainable_tensors, path) / max(1, issued),
    }
    hosts = {phase: step_host_costs(cal, costs.table, phase, per_op[phase]) for phase in per_op}
    run = _Run(costs, spec, kinds, times, hosts, cal)
    clock = _Clock()
    run.step(clock)
    first = (run.marks[0], clock.device - run.before)
    begin = _Clock()
    if not synced_loop:
        # NB: a loop that does not synchronise issues the next step while the device still
        # runs the last: the step time is the pipeline's steady period, the advance of the
        # clocks over a third step (the simulation is shift-invariant once it is filled)
        run.step(clock)
        begin = dataclasses.replace(clock, host=max(clock.host, clock.device))
        run.step(clock)
    seconds = max(clock.host, clock.device) - begin.host
    compute, memory = clock.compute - begin.compute, clock.memory - begin.memory
    samples = spec.batch * spec.grad_accum
    per_micro = costs.flops(Phase.FORWARD) + costs.flops(Phase.BACKWARD)
    notes = family_notes(device, fit) + rates.borrowed_notes()
    notes += blind_notes(device, bool(costs.backward), shipped, synced_loop)
    return StepTime(
        device=device.name,
        micro_batch=spec.batch,
        grad_accum=spec.grad_accum,
        seconds=seconds,
        forward_seconds=first[0][0],
        backward_seconds=first[0][1],
        optimizer_seconds=first[1],
        samples_per_second=samples / seconds,
        tokens_per_second=samples * tokens_per_sample / seconds if tokens_per_sample else None,
        flops_per_step=per_micro * spec.grad_accum + costs.flops(Phase.OPTIMIZER),
        compute_bound_share=compute / seconds,
        memory_bound_share=memory / seconds,
        host_bound_share=max(0.0, 1.0 - (compute + memory) / seconds),
        label=TimeLabel.MODELLED,
        basis=_basis(device, cal, fit),
        notes=tuple(notes),
    )


def scaled(modelled: StepTime, reference: StepTime, measured_seconds: float, on: str) -> StepTime:
    """`modelled` rescaled by a measured step: measured on `on` (whose modelled time is
    `reference`) times the ratio of the two modelled times ("calibrated")."""
    if not 0 < measured_seconds < math.inf:
        raise SpecError(
            [f"a measured step time must be a positive number of seconds, got {measured_seconds}"]
        )
    factor = measured_seconds / reference.seconds
    seconds = modelled.seconds * factor
    samples = modelled.samples_per_second * modelled.seconds / seconds
    tokens = (
        None
        if modelled.tokens_per_second is None
        else modelled.tokens_per_second * modelled.seconds / seconds
    )
    same = modelled.device == reference.device
    return dataclasses.replace(
        modelled,
        seconds=seconds,
        forward_seconds=modelled.forward_seconds * factor,
        backward_seconds=modelled.backward_seconds * factor,
        optimizer_seconds=modelled.optimizer_seconds * factor,
        samples_per_second=samples,
        tokens_per_second=tokens,
        label=TimeLabel.MEASURED if same else TimeLabel.CALIBRATED,
        notes=without_blind_check(modelled.notes),
        basis=MeasuredBasis(
            seconds=measured_seconds,
            on=on,
            ratio=None if same else modelled.seconds / reference.seconds,
        ),
    )
