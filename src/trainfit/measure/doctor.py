"""`diagnose()`: does this machine's training stack work, and if not, what to do about it.

Replaces the hand verification steps of a setup guide (`nvidia-smi`, `torch.cuda.is_available()`,
`torch.backends.mps.is_available()`, "driver >= 530 for CUDA 12.1"): torch, CUDA and driver
versions and whether they agree; each GPU with its total and free memory and whether this torch
has kernels for it; MPS and its CPU fallback; bf16, TF32 and NCCL; and a tiny real training step
on every device (CPU always, each CUDA GPU, MPS). Each problem comes with its fix.

Every reading goes through a `Probe` (`trainfit.hardware.probe`): `TorchProbe` by default, a
`FakeProbe` in tests. `diagnose` never raises for the environment: a reading that raises becomes
a failed check carrying the error's message. A `Diagnosis` is `ok` when no check failed;
warnings (no GPU, a busy GPU, the MPS fallback unset) do not fail it. Each check's finding is
typed (`trainfit.measure.findings`); its words and fix: `trainfit.report.doctor_words`.

Known limitations:
- "Other processes hold X GiB" is total minus free as `torch.cuda.mem_get_info` reports it
  after creating this process's CUDA context, so X includes that context (about 0.5 GiB on an
  H100 with torch 2.11; see `trainfit.hardware.detect`).
- The driver/CUDA agreement is judged on versions alone (NVIDIA's minor-version-compatibility
  rule); a driver that is new enough but broken shows up in the tiny step instead.
- Only NVIDIA drivers are checked; a ROCm torch (GPUs but no `torch.version.cuda`) skips the
  driver check.
- The MPS step runs in fp32: bf16 on MPS depends on the macOS release, which is not modelled.
- The MPS paths are written against `FakeProbe` only: they have never run on a Mac.
"""

from __future__ import annotations

import math

from trainfit.hardware.probe import Probe, StepReading, TorchProbe
from trainfit.measure.cuda_stack import (
    check_bf16,
    check_cuda,
    check_driver,
    check_kernels,
    check_nccl,
    check_tf32,
    check_torch,
    read_driver_cuda,
    read_driver_version,
    read_gpus,
    wheel_for,
)
from trainfit.measure.diagnosis import (
    CheckLog,
    Diagnosis,
    Status,
    parse_version,
    read,
)
from trainfit.measure.findings import (
    FallbackFound,
    FallbackOutcome,
    MpsFound,
    MpsOutcome,
    StepFound,
    StepOutcome,
    Wheel,
)


def _check_mps(doc: CheckLog, system: str, built: bool | None, available: bool | None) -> None:
    if system != "Darwin":
        doc.add("mps", Status.SKIP, MpsFound(outcome=MpsOutcome.NOT_MAC, system=system))
        return
    mac = read(doc.probe.mac_version).value
    if available:
        doc.add("mps", Status.OK, MpsFound(outcome=MpsOutcome.AVAILABLE, mac=mac))
    elif built:
        doc.add("mps", Status.WARN, MpsFound(outcome=MpsOutcome.NOT_AVAILABLE, mac=mac))
    else:
        doc.add("mps", Status.WARN, MpsFound(outcome=MpsOutcome.NOT_BUILT, mac=mac))


def _check_mps_fallback(doc: CheckLog, system: str, value: str | None) -> None:
    if system != "Darwin":
        doc.add("mps fallback", Status.SKIP, FallbackFound(outcome=FallbackOutcome.NOT_MAC))
        return
    if value is None:
        doc.add("mps fallback", Status.WARN, FallbackFound(outcome=FallbackOutcome.UNSET))
    elif value == "1":
        found = FallbackFound(outcome=FallbackOutcome.ON, value=value)
        doc.add("mps fallback", Status.OK, found)
    else:
        found = FallbackFound(outcome=FallbackOutcome.OTHER, value=value)
        doc.add("mps fallback", Status.WARN, found)


def _check_step(doc: CheckLog, device: str, bf16: bool, wheel: Wheel) -> StepReading | None:
    name = f"step {device}"
    got = read(doc.probe.tiny_train_step, device, bf16)
    step: StepReading | None = got.value
    if step is None:
        found = StepFound(outcome=StepOutcome.RAISED, device=device, error=got.error, wheel=wheel)
        doc.add(name, Status.FAIL, found)
        return None
    if not math.isfinite(step.loss):
        outcome, status = StepOutcome.NOT_FINITE, Status.FAIL
    elif not step.params_changed:
        outcome, status = StepOutcome.UNCHANGED, Status.FAIL
    else:
        outcome, status = StepOutcome.TRAINED, Status.OK
    found = StepFound(
        outcome=outcome,
        device=device,
        bf16_autocast=step.bf16_autocast,
        seconds=step.seconds,
        loss=step.loss,
        wheel=wheel,
    )
    doc.add(name, status, found)
    return step


def diagnose(probe: Probe | None = None, *, run_steps: bool = True) -> Diagnosis:
    """Check this machine's training stack (or what `probe` reports); never raises for it.

    `run_steps=False` skips the tiny training steps (their checks say so). CUDA is initialised
    only when torch counts a GPU; free memory is read before any step runs.
    """
    probe = probe or TorchProbe()
    doc = CheckLog(probe=probe)
    version = read(probe.torch_version).value
    build = read(probe.cuda_runtime_version)
    system = read(probe.system).value or "unknown"
    mps_built = read(probe.mps_built).value
    mps_available = read(probe.mps_available).value
    count = read(probe.cuda_device_count)
    n_gpus = count.value or 0
    smi_gpus = None if n_gpus else read(probe.nvidia_smi_gpus).value
    gpus_present = bool(n_gpus or smi_gpus)
    driver = read_driver_version(probe) if gpus_present else None
    driver_cuda, driver_cuda_source = read_driver_cuda(probe) if gpus_present else (None, None)
    wheel = wheel_for(parse_version(driver_cuda))

    check_torch(doc, version, build, mps_built)
    check_cuda(doc, version, count, build.value, smi_gpus, driver_cuda, bool(mps_available))
    check_driver(doc, gpus_present, build.value, driver, driver_cuda, driver_cuda_source)
    gpus = read_gpus(doc, n_gpus)
    check_kernels(doc, gpus, wheel)
    _check_mps(doc, system, mps_built, mps_available)
    fallback = read(probe.env, "PYTORCH_ENABLE_MPS_FALLBACK").value
    _check_mps_fallback(doc, system, fallback)
    check_bf16(doc, gpus)
    check_tf32(doc, gpus)
    nccl = check_nccl(doc, bool(n_gpus), system)

    devices = [("cpu", False)]
    devices += [(f"cuda:{g.index}", bool(g.bf16)) for g in gpus]
    if mps_available:
        devices.append(("mps", False))
    steps = []
    for device, bf16 in devices:
        if not run_steps:
            found = StepFound(outcome=StepOutcome.NOT_RUN, device=device, wheel=wheel)
            doc.add(f"step {device}", Status.SKIP, found)
            continue
        step = _check_step(doc, device, bf16, wheel)
        if step is not None:
            steps.append(step)
    return Diagnosis(
        torch_version=version,
        cuda_build=build.value,
        driver_version=driver,
        driver_cuda_version=driver_cuda,
        gpus=gpus,
        mps_built=mps_built,
        mps_available=mps_available,
        mps_fallback=fallback,
        nccl_version=nccl,
        steps=tuple(steps),
        checks=tuple(doc.checks),
    )


__all__ = ["diagnose"]
