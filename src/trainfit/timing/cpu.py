"""How long one training step takes on the host CPU: each traced op's time, summed.

The step is traced for the CPU (`Target.cpu()`), and its op costs (`trainfit.trace.costs`, the
same table the GPU model reads) are timed op by op. On the CPU one thread issues and runs every
op in turn (PyTorch's kernels spread over the cores inside an op), so the step's time is the sum:
- a matrix multiply, attention, convolution or recurrent layer: its FLOPs at the rate a GEMM
  (a convolution: a 3x3 convolution, forward or backward) of that many FLOPs reached in the
  calibration's microbenchmark, in the class its dtype runs in on this host (`HalfSupport`:
  fp32, native half, or emulated half), or its bytes at the memory rate, whichever is longer;
- every other kernel: its bytes at the rate an elementwise op of that many bytes reached;
- a view or other host-only op, and a module call: a fixed cost each;
- every op of the backward pass: the autograd engine's extra cost per op on top.
Each microbenchmark time includes PyTorch's dispatch, so small ops cost their fixed overhead.

The constants (`cpu_calibration.json`) come from microbenchmarks on one host, run on one thread
and timed in CPU time so that other processes on a shared machine hardly move them
(benchmarks/accuracy_cpu/calibrate_time.py), and the autograd cost per backward op from real
steps of the calibration models there. On the same CPU model with N threads the GEMM rates are
N times the one-thread rates; on another CPU they are scaled by the ratio of the two CPUs' peak
fp32 FLOP/s (threads x SIMD lanes x FMA units x clock, `CpuFeatures.peak_fp32_flops`). The
emulated GEMM runs on one thread in scalar code: it is scaled by the clock only.
Memory-bound ops keep the one-thread rates and fixed costs keep theirs.

Known limitations: the prediction is for an idle CPU (on a busy one every step is slower;
`trainfit measure` warns when the load average exceeds the cores). GEMMs are assumed to split
perfectly over threads, and memory-bound ops not at all (one core's rate: an overestimate
where several cores share the memory traffic). A convolution's rate is read by its FLOPs
alone, though its shape matters (a 3-channel first layer runs at a fifth of the others' rate)
and oneDNN's layout reorders are not traced: CNN steps came out 17-21% short. Other CPUs are
scaled by their peak only (cache sizes, memory bandwidth and AVX-512 frequency drops are not
modelled); bf16 *converted* (AVX-512 without avx512_bf16) is timed at the fp32 rate and
native fp16 at the native bf16 rate, neither measured; data loading and Python work outside
the step are not counted. Checked on 10 cases of this host (benchmarks/accuracy_cpu/).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from trainfit.hardware.cpu_features import (
    NATIVE_FLAGS,
    CpuFeatures,
    HalfSupport,
)
from trainfit.spec import TrainSpec
from trainfit.timing.basis import CpuBasis, SlowHalfPrecision
from trainfit.timing.kernels import interpolate_curve
from trainfit.timing.missing import CpuFigure, RateMissing, UnreadCpu
from trainfit.timing.step import StepTime, TimeLabel
from trainfit.trace.costs import OpCost, OpKind, StepCosts
from trainfit.training import Phase

_COMPUTE = (OpKind.MATMUL, OpKind.ATTENTION, OpKind.CONV, OpKind.RNN)


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuCalibration:
    """The CPU step-time model's constants, measured on one host."""

    host: dict[str, Any]
    """The calibration host: model, cores, threads, clock_mhz, flags, peak_fp32_flops."""
    date: str
    versions: dict[str, str]
    source: str
    load_average: list[float]
    """The 1, 5 and 15-minute load averages when the microbenchmarks ran."""
    gemm_curve: dict[str, list[list[float]]]
    """Per class ("fp32", "native", "emulated"): (FLOPs of one GEMM, FLOP/s reached)."""
    memory_curve: dict[str, list[list[float]]]
    """Per dtype ("fp32", "bf16"): (bytes one elementwise op moves, bytes/s reached)."""
    conv_curve: dict[str, dict[str, list[list[float]]]]
    """Per class ("fp32", "native"), per side ("forward", "backward"): (FLOPs of one 3x3
    convolution, FLOP/s reached). Other classes' convolutions run at their GEMM rate."""
    conv_source: dict[str, Any]
    """When the convolution microbenchmarks ran (date, load average): added after the rest."""
    host_op_seconds: float
    """A view or other host-only op."""
    module_call_seconds: float
    """An `nn.Module` call's own cost (hooks, dispatch), outside its ops."""
    backward_op_seconds: float
    """The autograd engine's extra cost per backward op (fitted on the calibration models)."""
    fitted_on: list[str]
    """The calibration models `backward_op_seconds` was fitted on."""

    @property
    def peak_fp32_flops(self) -> float:
        return float(self.host["peak_fp32_flops"])


@cache
def cpu_calibration() -> CpuCalibration:
    """The shipped CPU calibration (`cpu_calibration.json`)."""
    text = resources.files("trainfit.timing").joinpath("cpu_calibration.json").read_text()
    return CpuCalibration(**json.loads(text))


def same_cpu(features: CpuFeatures, cal: CpuCalibration) -> bool:
    """Whether `features` describes the calibration's CPU model (name and SIMD width)."""
    return features.model == cal.host["model"] and features.simd_lanes == cal.host["simd_lanes"]


class CpuRates:
    """Per-op seconds on one host under one calibration."""

    def __init__(self, features: CpuFeatures, cal: CpuCalibration) -> None:
        self.features = features
        self.cal = cal
        # NB: PyTorch's reference GEMM (the emulated class) runs on one thread, in scalar
        # code: it scales with the clock only (per-thread CPU time, torch 2.13 on this host)
        self.emulated_scale = 1.0
        if same_cpu(features, cal):
            # NB: GEMMs split over the threads: the calibration's one-thread rate times threads
            self.scale = features.threads / cal.host["threads"]
        else:
            peak, clock = features.peak_fp32_flops, features.clock_mhz
            if peak is None or clock is None:
                figure = CpuFigure.CLOCK if clock is None else CpuFigure.SIMD_WIDTH
                raise RateMissing(UnreadCpu(figure=figure, source=features.source))
            self.scale = peak / cal.peak_fp32_flops
            self.emulated_scale = clock / cal.host["clock_mhz"]

    def gemm_class(self, dtype: str) -> str:
        """The calibration's GEMM class of a `dtype` matmul on this host."""
        if dtype not in ("bf16", "fp16"):
            return "fp32"
        support = self.features.half_support(dtype)
        return {
            HalfSupport.NATIVE: "native",
            HalfSupport.CONVERTED: "fp32",  # NB: assumed, not measured (see Known limitations)
            HalfSupport.EMULATED: "emulated",
        }[support]

    def memory_seconds(self, op: OpCost) -> float:
        curve = self.cal.memory_curve["bf16" if op.dtype in ("bf16", "fp16") else "fp32"]
        moved = max(op.bytes, 1)
        return moved / interpolate_curve(curve, moved)

    def seconds(self, op: OpCost, phase: Phase) -> float:
        cal = self.cal
        extra = cal.backward_op_seconds if phase is Phase.BACKWARD else 0.0
        if op.kind is OpKind.MODULE:
            return cal.module_call_seconds
        if op.kind in (OpKind.HOST, OpKind.SYNC) or op.kernels == 0:
            return cal.host_op_seconds + extra
        memory = self.memory_seconds(op)
        if op.kind not in _COMPUTE or op.flops == 0:
            return memory + extra
        kind = self.gemm_class(op.dtype)
        scale = self.emulated_scale if kind == "emulated" else self.scale
        curve = cal.gemm_curve[kind]
        if op.kind is OpKind.CONV and kind in cal.conv_curve:
            curve = cal.conv_curve[kind]["backward" if phase is Phase.BACKWARD else "forward"]
        rate = interpolate_curve(curve, op.flops) * scale
        return max(op.flops / rate, memory) + extra


def cpu_step_time(
    costs: StepCosts,
    spec: TrainSpec,
    features: CpuFeatures,
    tokens_per_sample: int | None = None,
    cal: CpuCalibration | None = None,
) -> StepTime:
    """The modelled time of one optimizer step of `spec` (micro-batch `spec.batch`, times
    `spec.grad_accum`) on the host CPU `features` describes. Raises RateMissing when the
    host's peak cannot be read and it is not the calibration's host."""
    cal = cal or cpu_calibration()
    rates = CpuRates(features, cal)
    per_phase: dict[Phase, float] = {}
    compute = 0.0
    for phase in (Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER):
        total = 0.0
        for op in costs.ops(phase):
            t = rates.seconds(op, phase)
            total += t
            if op.kind in _COMPUTE and op.flops:
                compute += t * (spec.grad_accum if phase is not Phase.OPTIMIZER else 1)
        per_phase[phase] = total
    micro = per_phase[Phase.FORWARD] + per_phase[Phase.BACKWARD]
    seconds = micro * spec.grad_accum + per_phase[Phase.OPTIMIZER]
    samples = spec.batch * spec.grad_accum
    flops = costs.flops(Phase.FORWARD) + costs.flops(Phase.BACKWARD)
    return StepTime(
        device=spec.device,
        micro_batch=spec.batch,
        grad_accum=spec.grad_accum,
        seconds=seconds,
        forward_seconds=per_phase[Phase.FORWARD],
        backward_seconds=per_phase[Phase.BACKWARD],
        optimizer_seconds=per_phase[Phase.OPTIMIZER],
        samples_per_second=samples / seconds,
        tokens_per_second=samples * tokens_per_sample / seconds if tokens_per_sample else None,
        flops_per_step=flops * spec.grad_accum + costs.flops(Phase.OPTIMIZER),
        compute_bound_share=min(1.0, compute / seconds),
        memory_bound_share=max(0.0, 1.0 - compute / seconds),
        host_bound_share=0.0,
        label=TimeLabel.MODELLED,
        basis=_basis(features, cal, rates.scale),
        notes=tuple(slow_half_precision(costs, features, cal)),
    )


def _basis(features: CpuFeatures, cal: CpuCalibration, scale: float) -> CpuBasis:
    return CpuBasis(
        host=cal.host["model"],
        date=cal.date,
        same_cpu=same_cpu(features, cal),
        threads=features.threads,
        gemm_scale=scale,
        simd_lanes=features.simd_lanes,
        clock_mhz=features.clock_mhz,
    )


def slow_half_precision(
    costs: StepCosts, features: CpuFeatures, cal: CpuCalibration | None = None
) -> list[SlowHalfPrecision]:
    """The half dtypes the step's matmuls use that this CPU does not run natively."""
    dtypes = {op.dtype for op in costs.table if op.kind in _COMPUTE and op.flops}
    return [
        slow_half_precision_of(dtype, features, cal)
        for dtype in sorted(dtypes & set(NATIVE_FLAGS))
        if features.half_support(dtype) is not HalfSupport.NATIVE
    ]


def slow_half_precision_of(
    dtype: str, features: CpuFeatures, cal: CpuCalibration | None = None
) -> SlowHalfPrecision:
    """How much slower than fp32 this CPU runs `dtype` matmuls ("bf16" or "fp16")."""
    cal = cal or cpu_calibration()
    support = features.half_support(dtype)
    slow = {HalfSupport.NATIVE: "native", HalfSupport.CONVERTED: "fp32"}.get(support, "emulated")
    at = 1e8  # NB: a GEMM of 10^8 FLOPs, e.g. (64 x 768) @ (768 x 1024)
    ratio = interpolate_curve(cal.gemm_curve["fp32"], at) / interpolate_curve(
        cal.gemm_curve[slow], at
    )
    return SlowHalfPrecision(
        dtype=dtype,
        support=support,
        cpu=features.model or "this CPU",
        missing_flags=NATIVE_FLAGS[dtype],
        slowdown=ratio,
    )
