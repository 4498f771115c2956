"""The step-time model's constants: the calibration read off single-kernel measurements of one
GPU (`calibration.json`, made by benchmarks/timing/calibrate.py), the host floor fitted on whole
training steps (`host_fit.json`, made by benchmarks/steptime/hostfit.py), and each device
family's kernel-time factor fitted on published training measurements (`families.json`, made
by benchmarks/external/fit.py). trainfit.timing.step prices a traced step with them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.optim import optimizer_entry
from trainfit.spec import OptimizerPath, Precision, TrainSpec
from trainfit.timing.basis import BlindCheck


@dataclass(frozen=True, kw_only=True, slots=True)
class Calibration:
    """The step-time model's constants, read off single-kernel measurements of one GPU."""

    device: str
    catalog_row: str
    date: str
    versions: dict[str, Any]
    source: str
    memory_efficiency: float
    elementwise_efficiency: float
    elementwise_fixed_seconds: float
    kernel_seconds: float
    matmul_efficiency: dict[str, float]
    matmul_fixed_seconds: dict[str, float]
    """Seconds a matmul takes beside its FLOPs' time, per precision (the intercept of time
    against FLOPs); a time on every device (step.Rates.matmul_fixed)."""
    attention_efficiency: dict[str, float]
    matmul_unaligned_efficiency: dict[str, float]
    foreach_tensor_seconds: float
    norm_curve: dict[str, list[list[float]]]
    norm_fp16_time_over_fp32: dict[str, float]
    """An fp16 batch norm's time over the same batch norm's in fp32, "forward" and "backward":
    cuDNN runs both, and its time follows the elements more than the bytes."""
    conv_fit: dict[str, dict[str, float]]
    conv_channel_curve: dict[str, dict[str, list[list[float]]]]
    """A convolution's time over `conv_fit`'s, by its smaller implicit-GEMM side (channels
    times kernel size): per precision group ("half": fp16 and bf16; "tf32": fp32) and pass
    ("forward", "backward"), points (side, factor), 1 from the last point on. cuDNN's kernels
    for few channels run far below the fit's efficiency, their weight gradients most."""
    attention_curve: dict[str, dict[str, dict[str, list[Any]]]]
    """A fused attention call's time over the FLOPs form's (`attention_efficiency`), over the
    parallel curve's slowdown at the measured call's own blocks per SM: per dtype group
    ("half", "fp32"), variant ("full", "causal", "causal-dropout") and pass, a list of
    (head size, curve of (query length, factor)) (`kernels.attention_factor`)."""
    attention_parallel_curve: dict[str, dict[str, dict[str, list[list[float]]]]]
    """The slowdown of a fused attention call with few problems (batch x heads), its time
    over the FLOPs form's against a call of the grid: per dtype group, "full" or "causal"
    and pass, points (kernel blocks per SM, factor)."""
    host_op_seconds: float
    host_module_call_seconds: float
    sync_seconds: float
    host_backward_op_seconds: float
    host_library_extra_seconds: dict[str, float]
    optimizer_host_seconds_per_param: dict[str, float]
    optimizer_host_seconds_fixed: dict[str, float]
    scaler_host_seconds_per_param: float
    lstm_persistent_hidden: int
    lstm_step_seconds: dict[str, dict[str, float]]
    shared: dict[str, dict[str, str]]
    """Figures one precision takes from another (table -> precision -> the precision whose
    figure it is), named in calibration.json rather than copied there: fp16 runs at bf16's
    tensor rate on the calibration GPU, and its convolutions were fitted together with bf16's
    (one fit over both dtypes' rows), its unaligned matmuls not measured (bf16's)."""
    host_fit: HostFit

    def optimizer_host(
        self, spec: TrainSpec, tensors: int, path: OptimizerPath | None = None
    ) -> float:
        """Host seconds of one optimizer step over `tensors` trainable tensors on `path` (the
        one a CUDA step runs, `trainfit.optim.run_path`): the host cost measured on the
        optimizer's CUDA default path, its fixed and per-tensor parts scaled by the path's
        measured ratios to that default (`host_fit.json` `optimizer_paths`). None: the
        calibrated cost as it stands (a target where the paths were not measured)."""
        kind = optimizer_entry(spec.optimizer).host_timed_as.value
        if kind not in self.optimizer_host_seconds_per_param:
            calibrated = ", ".join(sorted(self.optimizer_host_seconds_per_param))
            raise TrainfitError(
                f"optimizer {spec.optimizer.value!r} is timed as {kind!r}, whose host cost the "
                f"calibration of {self.device} lacks; calibrated: {calibrated}"
            )
        ratios = self.host_fit.optimizer_paths.get(kind, {})
        if path is None:
            fixed_ratio, per_ratio = 1.0, 1.0
        elif path.value not in ratios:
            measured = ", ".join(sorted(ratios)) or "none"
            raise TrainfitError(
                f"the host cost of {kind!r} on its {path.value} path was not measured "
                f"(measured: {measured}); choose another optimizer path"
            )
        else:
            fixed_ratio, per_ratio = ratios[path.value]
        scaler = self.scaler_host_seconds_per_param if spec.precision is Precision.FP16 else 0.0
        line = self.host_fit.optimizer_lines.get(kind)
        if line is not None:
            fixed, per = line
            return (
                fixed * fixed_ratio
                + (per * per_ratio + scaler * self.host_fit.optimizer_scale) * tensors
            )
        per = self.optimizer_host_seconds_per_param[kind] * per_ratio + scaler
        fixed = self.optimizer_host_seconds_fixed[kind] * fixed_ratio
        return (fixed + per * tensors) * self.host_fit.optimizer_scale


@dataclass(frozen=True, kw_only=True, slots=True)
class HostFit:
    """The host floor's constants fitted on whole training steps (`host_fit.json`): what the
    single-op microbenchmarks miss of the host's work in a real step."""

    op_seconds: float
    """Host seconds of a forward op that records no autograd node (no_grad, frozen inputs)."""
    graph_op_seconds: float
    """Host seconds of a forward op that records an autograd node."""
    backward_op_seconds: float
    """Host seconds of an op the autograd engine runs in backward."""
    module_seconds: float
    """Host seconds of a module's call (`nn.Module.__call__`, hooks) beside its ops."""
    view_seconds: float
    """Host seconds of a forward op that launches no kernel (a view, an empty tensor)."""
    backward_view_seconds: float
    """Host seconds of a backward op that launches no kernel."""
    step_seconds: float
    """Host seconds of one optimizer step outside its ops (the loop's Python, zero_grad)."""
    pass_seconds: float
    """Host seconds of starting a micro-batch's backward (the autograd engine's set-up)."""
    rnn_call_seconds: float
    """Host seconds of a cuDNN recurrent layer's call beside an op's, forward and backward each
    (its weights' checks, descriptors and workspace)."""
    library_scale: float
    """cuDNN's microbenchmarked host extra per convolution and BatchNorm call times this."""
    optimizer_scale: float
    """An optimizer's microbenchmarked host cost times this, where `optimizer_lines` has no
    line for it (and the fp16 loss scaler's per-tensor cost)."""
    source: str
    fitted_on: tuple[str, ...]
    optimizer_lines: dict[str, tuple[float, float]]
    """Optimizer kind -> (fixed, per trainable tensor) host seconds of `optimizer.step()`,
    a least-squares line over whole steps timed on real parameter lists (6 to 34 tensors)."""
    optimizer_paths: dict[str, dict[str, tuple[float, float]]]
    """Optimizer kind -> path -> (fixed, per tensor) host cost as ratios to the kind's CUDA
    default path (foreach; Adafactor's for-loop), measured in the same processes
    (`benchmarks/steptime/optimizer_paths.py`)."""
    rnn_layer_seconds: dict[str, float]
    """"forward"/"backward" -> device seconds a cuDNN recurrent call running the stepped kernels
    adds per layer and direction beside its steps, read off calls of 1-4 layers timed whole."""


@cache
def calibration() -> Calibration:
    """The shipped calibration (one NVIDIA H100 80GB HBM3)."""
    files = resources.files("trainfit.timing")
    raw = _with_shared(json.loads(files.joinpath("calibration.json").read_text()))
    raw.pop("isolated_launch_seconds", None)
    host = json.loads(files.joinpath("host_fit.json").read_text())
    fit = HostFit(
        **host["constants"],
        source=host["source"],
        fitted_on=tuple(host["fitted_on"]),
        optimizer_lines={k: (v[0], v[1]) for k, v in host["optimizer_lines"].items()},
        rnn_layer_seconds={k: float(v) for k, v in host["rnn_layer_seconds"].items()},
        optimizer_paths={
            kind: {path: (r[0], r[1]) for path, r in paths.items()}
            for kind, paths in host["optimizer_paths"]["ratios"].items()
        },
    )
    return Calibration(**raw, host_fit=fit)


def _with_shared(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` with each figure `shared` names filled in from the precision it names."""
    for table, precisions in raw["shared"].items():
        for precision, source in precisions.items():
            if precision in raw[table]:
                raise ValueError(f"calibration: {table}.{precision} is both given and shared")
            raw[table][precision] = raw[table][source]
    return raw


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyFit:
    """One device family's kernel-time factor, fitted on public training measurements."""

    family: str
    device_time_factor: float
    """Every device kernel's modelled time (H100 efficiencies, this device's rates) times this."""
    rows: int
    """How many published measurements it was fitted on."""
    date: str
    heldout: tuple[int, float, float] | None = None
    """The family's held-out check: rows, median and worst |predicted/measured - 1|."""


@cache
def family_fits() -> dict[str, FamilyFit]:
    """Catalog device name -> its family's fit (`families.json`; the H100's own calibration
    and devices of no fitted family are absent)."""
    raw = json.loads(resources.files("trainfit.timing").joinpath("families.json").read_text())
    out: dict[str, FamilyFit] = {}
    for name, family in raw["families"].items():
        if family["device_time_factor"] is None:
            continue
        fit = FamilyFit(
            family=name,
            device_time_factor=float(family["device_time_factor"]),
            rows=len(family["fitted_on"]),
            date=raw["date"],
            heldout=(
                (check["rows"], check["median_error"], check["worst_error"])
                if (check := family.get("heldout_check"))
                else None
            ),
        )
        out.update({device: fit for device in family["devices"]})
    return out


@cache
def blind_check() -> BlindCheck:
    """The shipped rules' blind check (`blind_check.json`)."""
    raw = json.loads(resources.files("trainfit.timing").joinpath("blind_check.json").read_text())
    raw.pop("made_by")
    return BlindCheck(**{**raw, "sets": tuple(raw["sets"]), "measured": tuple(raw["measured"])})
