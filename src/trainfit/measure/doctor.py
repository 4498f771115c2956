"""`diagnose()`: does this machine's training stack work, and if not, what to do about it.

Replaces the hand verification steps of a setup guide (`nvidia-smi`, `torch.cuda.is_available()`,
`torch.backends.mps.is_available()`, "driver >= 530 for CUDA 12.1"): torch, CUDA and driver
versions and whether they agree; each GPU with its total and free memory and whether this torch
has kernels for it; MPS and its CPU fallback; bf16, TF32 and NCCL; and a tiny real training step
on every device (CPU always, each CUDA GPU, MPS). Each problem comes with its fix.

Every reading goes through a `Probe` (`trainfit.hardware.probe`): `TorchProbe` by default, a
`FakeProbe` in tests. `diagnose` never raises for the environment: a reading that raises becomes
a failed check carrying the error's message. A `Diagnosis` is `ok` when no check failed;
warnings (no GPU, a busy GPU, the MPS fallback unset) do not fail it.

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
    wheel_command,
)
from trainfit.measure.diagnosis import (
    CheckLog,
    Diagnosis,
    Status,
    parse_version,
    read,
)

MPS_MACOS_NOTE = (
    "MPS needs a Mac with Apple silicon and, for torch 2.11, macOS 14.0 or later (12.3 for the "
    "first MPS releases); an x86_64 Python running under Rosetta cannot use it either"
)
"""Source: Apple, "Accelerated PyTorch training on Mac" (developer.apple.com/metal/pytorch) and
the PyTorch MPS notes; seen 2026-11-27."""


def _check_mps(doc: CheckLog, system: str, built: bool | None, available: bool | None) -> None:
    if system != "Darwin":
        doc.add("mps", Status.SKIP, f"not a Mac ({system})")
        return
    mac = read(doc.probe.mac_version).value
    on = f"macOS {mac}" if mac else "macOS (version unknown)"
    if available:
        doc.add("mps", Status.OK, f"MPS available ({on})")
    elif built:
        doc.add(
            "mps",
            Status.WARN,
            f"MPS is built into torch but not available on this {on}: training runs on the CPU",
            f"{MPS_MACOS_NOTE}: update macOS, or use an arm64 Python",
        )
    else:
        doc.add(
            "mps",
            Status.WARN,
            f"this torch has no MPS backend ({on}): training runs on the CPU",
            "pip install --force-reinstall torch (the macOS arm64 wheel has MPS)",
        )


def _check_mps_fallback(doc: CheckLog, system: str, value: str | None) -> None:
    if system != "Darwin":
        doc.add("mps fallback", Status.SKIP, "not a Mac")
        return
    how = (
        "export PYTORCH_ENABLE_MPS_FALLBACK=1 before Python starts (in the shell or the job "
        "script; setting os.environ after importing torch is too late)"
    )
    if value is None:
        doc.add(
            "mps fallback",
            Status.WARN,
            "PYTORCH_ENABLE_MPS_FALLBACK is unset: an op MPS lacks raises NotImplementedError "
            "instead of running on the CPU",
            f"{how}; such ops then run on the CPU (slower, with a UserWarning)",
        )
    elif value == "1":
        doc.add(
            "mps fallback",
            Status.OK,
            "PYTORCH_ENABLE_MPS_FALLBACK=1: ops MPS lacks run on the CPU (slower)",
        )
    else:
        doc.add(
            "mps fallback",
            Status.WARN,
            f"PYTORCH_ENABLE_MPS_FALLBACK={value!r}: only '1' turns the CPU fallback on",
            how,
        )


def _check_step(doc: CheckLog, device: str, bf16: bool, wheel: str) -> StepReading | None:
    name = f"step {device}"
    kind = device.split(":")[0]
    fixes = {
        "cpu": "torch itself is broken here: pip install --force-reinstall torch",
        "cuda": f"the GPU stack cannot train: see the cuda, driver and kernels checks; {wheel}",
        "mps": f"the MPS stack cannot train: update macOS and torch ({MPS_MACOS_NOTE})",
    }
    got = read(doc.probe.tiny_train_step, device, bf16)
    step: StepReading | None = got.value
    if step is None:
        doc.add(name, Status.FAIL, f"the tiny training step raised {got.error}", fixes[kind])
        return None
    how = "bf16 autocast" if step.bf16_autocast else "fp32"
    ran = f"MLP forward+backward+AdamW, {how}, {step.seconds * 1e3:.1f} ms"
    if not math.isfinite(step.loss):
        doc.add(name, Status.FAIL, f"{ran}: loss is {step.loss}", fixes[kind])
    elif not step.params_changed:
        doc.add(name, Status.FAIL, f"{ran}: the optimizer step changed no parameter", fixes[kind])
    else:
        doc.add(name, Status.OK, f"{ran}: loss {step.loss:.4f} finite, parameters updated")
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
    wheel = wheel_command(parse_version(driver_cuda))

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
            doc.add(
                f"step {device}", Status.SKIP, "not run: the tiny training steps were turned off"
            )
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


__all__ = ["MPS_MACOS_NOTE", "diagnose"]
