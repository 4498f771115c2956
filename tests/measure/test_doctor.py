"""`trainfit.measure.doctor`: the CUDA, driver, MPS and NCCL paths through FakeProbe, the
findings as typed values, and the real diagnosis on this machine."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.measure.doctor_boxes import GiB, _gpu, _h100, _h100_box, _mac
from trainfit.hardware.probe import FakeProbe, StepReading
from trainfit.measure.diagnosis import Check, Diagnosis, Status
from trainfit.measure.doctor import diagnose
from trainfit.measure.findings import CudaFound, CudaOutcome, DriverFound, DriverOutcome, Wheel
from trainfit.report.doctor import diagnosis_dict
from trainfit.report.doctor_words import fix_text, found_text

CU128 = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu128"
CU124 = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu124"


def _check(diagnosis: Diagnosis, name: str) -> Check:
    (found,) = [c for c in diagnosis.checks if c.name == name]
    return found


def _statuses(diagnosis: Diagnosis) -> dict[str, str]:
    return {c.name: c.status.value for c in diagnosis.checks}


def test_healthy_h100_box() -> None:
    probe = _h100_box()
    diagnosis = diagnose(probe)
    assert diagnosis.ok
    assert _statuses(diagnosis) == {
        "torch": "ok",
        "cuda": "ok",
        "driver": "ok",
        "cuda:0 memory": "ok",
        "cuda:0 kernels": "ok",
        "mps": "skip",
        "mps fallback": "skip",
        "bf16": "ok",
        "tf32": "ok",
        "nccl": "ok",
        "step cpu": "ok",
        "step cuda:0": "ok",
    }
    assert found_text(_check(diagnosis, "driver").found) == (
        "driver 580.159.04 supports CUDA up to 13.0 (NVML); torch is built with CUDA 13.0: "
        "they agree"
    )
    assert (diagnosis.driver_version, diagnosis.driver_cuda_version) == ("580.159.04", "13.0")
    assert diagnosis.nccl_version == "2.27.7"
    assert [(s.device, s.bf16_autocast) for s in diagnosis.steps] == [
        ("cpu", False),
        ("cuda:0", True),
    ]
    assert all(fix_text(c.found) is None for c in diagnosis.checks)
    # NVML answered: nvidia-smi is not asked, and its GPU list is not needed when torch sees GPUs
    assert {"nvidia_smi_cuda_version", "nvidia_smi_gpus"}.isdisjoint(probe.calls)
    # free memory is read before any training step runs on the GPU
    assert probe.calls.index("cuda_free_memory") < probe.calls.index("tiny_train_step cuda:0")


def test_cpu_only_wheel_with_a_gpu_in_nvidia_smi() -> None:
    probe = FakeProbe(
        version="2.11.0+cpu",
        smi_gpus=("NVIDIA GeForce RTX 4060",),
        smi_driver="570.86.10",
        smi_cuda="12.8",
    )
    diagnosis = diagnose(probe)
    assert not diagnosis.ok
    cuda = _check(diagnosis, "cuda")
    assert cuda.status is Status.FAIL
    assert found_text(cuda.found) == (
        "torch 2.11.0+cpu is a CPU-only build, but nvidia-smi sees 1 GPU(s): "
        "NVIDIA GeForce RTX 4060"
    )
    assert fix_text(cuda.found) is not None
    assert fix_text(cuda.found).startswith(
        f"install a CUDA build of torch: {CU128} (none for your torch"
    )
    assert _check(diagnosis, "driver").status is Status.SKIP
    assert (diagnosis.driver_version, diagnosis.driver_cuda_version) == ("570.86.10", "12.8")
    assert [s.device for s in diagnosis.steps] == ["cpu"]


def test_driver_too_old_for_torchs_cuda_major() -> None:
    # NB: as it happens: torch's CUDA 13 runtime cannot start on a 12.4 driver, so torch counts
    # no GPU while nvidia-smi lists it.
    probe = _h100_box(
        gpus=(),
        smi_gpus=("NVIDIA H100 80GB HBM3",),
        nvml_driver="550.54.15",
        nvml_cuda_driver=12040,
    )
    diagnosis = diagnose(probe)
    assert not diagnosis.ok
    driver = _check(diagnosis, "driver")
    assert driver.status is Status.FAIL
    assert found_text(driver.found) == (
        "driver 550.54.15 supports CUDA up to 12.4 (NVML); torch is built with CUDA 13.0: "
        "CUDA 13.x needs a newer driver"
    )
    assert fix_text(driver.found) is not None
    assert fix_text(driver.found).startswith(
        "upgrade the NVIDIA driver to one supporting CUDA 13.0 (>= 580 on Linux), or install "
        f"torch for the CUDA the driver has: {CU124} "
    )
    cuda = _check(diagnosis, "cuda")
    assert (cuda.status, fix_text(cuda.found)) == (
        Status.FAIL,
        "the driver is too old for CUDA 13.0: see the driver check's fix",
    )
    assert found_text(cuda.found) == (
        "torch is built with CUDA 13.0 but sees no GPU, nvidia-smi sees 1 GPU(s): "
        "NVIDIA H100 80GB HBM3"
    )


def test_driver_older_minor_is_a_warning() -> None:
    probe = _h100_box(cuda_version="12.8", nvml_driver="550.54.15", nvml_cuda_driver=12040)
    diagnosis = diagnose(probe)
    driver = _check(diagnosis, "driver")
    assert driver.status is Status.WARN
    assert "runs through CUDA minor-version compatibility" in found_text(driver.found)
    assert diagnosis.ok  # a warning does not fail the diagnosis


def test_driver_cuda_version_from_nvidia_smi_when_nvml_is_missing() -> None:
    probe = _h100_box(nvml_driver=None, nvml_cuda_driver=None, smi_driver="580.82", smi_cuda="13.0")
    driver = _check(diagnose(probe), "driver")
    assert driver.status is Status.OK
    assert found_text(driver.found).startswith(
        "driver 580.82 supports CUDA up to 13.0 (nvidia-smi)"
    )


def test_driver_cuda_version_unknown() -> None:
    probe = _h100_box(nvml_driver=None, nvml_cuda_driver=None)
    driver = _check(diagnose(probe), "driver")
    assert driver.status is Status.WARN
    assert found_text(driver.found).startswith(
        "driver (version unknown); the CUDA version it supports"
    )
    assert fix_text(driver.found) == "pip install nvidia-ml-py (NVML), or put nvidia-smi on PATH"


def test_hidden_gpus_name_cuda_visible_devices() -> None:
    probe = _h100_box(
        gpus=(), smi_gpus=("NVIDIA H100 80GB HBM3",), environ={"CUDA_VISIBLE_DEVICES": ""}
    )
    cuda = _check(diagnose(probe), "cuda")
    assert cuda.status is Status.FAIL
    assert fix_text(cuda.found) == (
        "CUDA_VISIBLE_DEVICES='' hides them from torch: unset it or list the GPUs' indexes "
        "(CUDA_VISIBLE_DEVICES=0)"
    )


def test_busy_gpu_with_little_free_memory() -> None:
    diagnosis = diagnose(_h100_box(gpus=(_h100(free=10 * GiB),)))
    memory = _check(diagnosis, "cuda:0 memory")
    assert memory.status is Status.WARN
    assert found_text(memory.found) == (
        "NVIDIA H100 80GB HBM3, 79.18 GiB total, 10.00 GiB free: other processes hold "
        "69.18 GiB (this process's CUDA context included)"
    )
    assert fix_text(memory.found) == (
        "stop them (nvidia-smi lists them) or pick another GPU with CUDA_VISIBLE_DEVICES; "
        "trainfit's verdicts count the whole 79.18 GiB, only 10.00 GiB is free"
    )
    assert diagnosis.ok
    assert diagnosis.gpus[0].free_memory_bytes == 10 * GiB


def test_free_memory_reading_that_raises_is_a_failed_check() -> None:
    diagnosis = diagnose(_h100_box(gpus=(_h100(free=None),)))
    memory = _check(diagnosis, "cuda:0 memory")
    assert memory.status is Status.FAIL
    assert found_text(memory.found) == (
        "NVIDIA H100 80GB HBM3, 79.18 GiB total; free memory unknown: RuntimeError: "
        "CUDA error: all CUDA-capable devices are busy or unavailable"
    )
    assert diagnosis.gpus[0].free_memory_bytes is None
    assert not diagnosis.ok


def test_failing_tiny_step() -> None:
    message = "CUDA error: no kernel image is available for execution on the device"
    probe = _h100_box(step_errors={"cuda:0": message})
    diagnosis = diagnose(probe)
    step = _check(diagnosis, "step cuda:0")
    assert step.status is Status.FAIL
    assert found_text(step.found) == f"the tiny training step raised RuntimeError: {message}"
    assert fix_text(step.found) is not None
    assert fix_text(step.found).startswith(
        "the GPU stack cannot train: see the cuda, driver and kernels"
    )
    assert [s.device for s in diagnosis.steps] == ["cpu"]
    assert not diagnosis.ok


@pytest.mark.parametrize(
    ("reading", "detail"),
    [
        (
            StepReading(
                device="cpu", bf16_autocast=False, loss=math.nan, params_changed=True, seconds=0.01
            ),
            "MLP forward+backward+AdamW, fp32, 10.0 ms: loss is nan",
        ),
        (
            StepReading(
                device="cpu", bf16_autocast=False, loss=1.2, params_changed=False, seconds=0.01
            ),
            "MLP forward+backward+AdamW, fp32, 10.0 ms: the optimizer step changed no parameter",
        ),
    ],
)
def test_step_with_a_bad_result_fails(reading: StepReading, detail: str) -> None:
    diagnosis = diagnose(FakeProbe(step_readings={"cpu": reading}))
    step = _check(diagnosis, "step cpu")
    assert (step.status, found_text(step.found)) == (Status.FAIL, detail)
    assert (
        fix_text(step.found) == "torch itself is broken here: pip install --force-reinstall torch"
    )
    json.dumps(diagnosis_dict(diagnosis), allow_nan=False)  # NaN is written as text


class _CountRaises(FakeProbe):
    def cuda_device_count(self) -> int:
        raise RuntimeError("CUDA driver initialization failed")


class _NcclRaises(FakeProbe):
    def nccl_version(self) -> str | None:
        raise OSError("libnccl.so.2: cannot open shared object file")


def test_reading_that_raises_is_a_check_not_a_traceback() -> None:
    diagnosis = diagnose(_h100_box(_CountRaises))
    cuda = _check(diagnosis, "cuda")
    assert cuda.status is Status.FAIL
    assert found_text(cuda.found) == (
        "torch could not count CUDA GPUs: RuntimeError: CUDA driver initialization failed"
    )
    assert fix_text(cuda.found) is not None
    assert fix_text(cuda.found).startswith(
        "check that the NVIDIA driver is loaded (nvidia-smi lists the GPUs)"
    )
    assert diagnosis.gpus == ()
    assert _check(diagnosis, "nccl").status is Status.SKIP  # no GPU counted: NCCL not asked
    assert not diagnosis.ok


def test_nccl_version_that_raises_is_a_warning() -> None:
    diagnosis = diagnose(_h100_box(_NcclRaises))
    nccl = _check(diagnosis, "nccl")
    assert nccl.status is Status.WARN
    assert found_text(nccl.found) == (
        "NCCL is available but its version is unknown: "
        "OSError: libnccl.so.2: cannot open shared object file"
    )
    assert diagnosis.nccl_version is None
    assert diagnosis.ok


def test_torch_without_nccl() -> None:
    nccl = _check(diagnose(_h100_box(nccl=False, nccl_ver=None)), "nccl")
    assert nccl.status is Status.WARN
    assert (
        found_text(nccl.found)
        == "this torch has no NCCL: multi-GPU training (DDP, FSDP) has only gloo"
    )
    assert fix_text(nccl.found) == "install the Linux CUDA wheel of torch, which bundles NCCL"


def test_gpu_without_kernels_in_this_torch() -> None:
    rtx5090 = _gpu("NVIDIA GeForce RTX 5090", 32 * GiB, (12, 0), 31 * GiB)
    probe = _h100_box(gpus=(rtx5090,), cuda_version="12.4", nvml_cuda_driver=12080)
    probe.arch_list = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
    kernels = _check(diagnose(probe), "cuda:0 kernels")
    assert kernels.status is Status.FAIL
    assert found_text(kernels.found) == (
        "NVIDIA GeForce RTX 5090 is sm_120; this torch has kernels for "
        "sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90 only"
    )
    assert fix_text(kernels.found) is not None
    assert fix_text(kernels.found).startswith(f"install a torch built for sm_120: {CU128} ")


def test_pre_ampere_gpu_has_no_bf16_and_steps_in_fp32() -> None:
    t4 = _gpu("Tesla T4", 15 * GiB, (7, 5), 14 * GiB)
    diagnosis = diagnose(_h100_box(gpus=(t4,), cuda_version="12.8", nvml_cuda_driver=12080))
    bf16 = _check(diagnosis, "bf16")
    assert (bf16.status, found_text(bf16.found)) == (
        Status.WARN,
        "no native bf16 on cuda:0 (compute capability below 8.0)",
    )
    assert (
        fix_text(bf16.found)
        == "train in fp16 with a GradScaler (--precision fp16) or fp32 on these GPUs"
    )
    assert found_text(_check(diagnosis, "tf32").found) == (
        "not on every GPU (compute capability below 8.0): fp32 is fp32"
    )
    assert [(s.device, s.bf16_autocast) for s in diagnosis.steps] == [
        ("cpu", False),
        ("cuda:0", False),
    ]


def test_two_gpus_each_step() -> None:
    diagnosis = diagnose(_h100_box(gpus=(_h100(), _h100())))
    assert [s.device for s in diagnosis.steps] == ["cpu", "cuda:0", "cuda:1"]
    assert "cuda:1 memory" in _statuses(diagnosis)


def test_tf32_state_follows_matmul_precision() -> None:
    tf32 = _check(diagnose(_h100_box(matmul_precision="high")), "tf32")
    assert (
        found_text(tf32.found) == "supported on every GPU; on for fp32 matmuls (precision 'high')"
    )


def test_mac_with_mps_and_fallback_unset() -> None:
    probe = _mac()
    diagnosis = diagnose(probe)
    assert diagnosis.ok
    fallback = _check(diagnosis, "mps fallback")
    assert fallback.status is Status.WARN
    assert found_text(fallback.found) == (
        "PYTORCH_ENABLE_MPS_FALLBACK is unset: an op MPS lacks raises NotImplementedError "
        "instead of running on the CPU"
    )
    assert fix_text(fallback.found) is not None
    assert fix_text(fallback.found).startswith(
        "export PYTORCH_ENABLE_MPS_FALLBACK=1 before Python starts"
    )
    assert found_text(_check(diagnosis, "mps").found) == "MPS available (macOS 14.5)"
    assert _check(diagnosis, "cuda").status is Status.SKIP
    assert [s.device for s in diagnosis.steps] == ["cpu", "mps"]
    assert (diagnosis.mps_built, diagnosis.mps_available, diagnosis.mps_fallback) == (
        True,
        True,
        None,
    )
    assert "nvidia_smi_gpus" in probe.calls  # asked, found nothing: no driver probed
    assert "nvml_driver_version" not in probe.calls


@pytest.mark.parametrize(
    ("value", "status", "detail"),
    [
        ("1", Status.OK, "PYTORCH_ENABLE_MPS_FALLBACK=1: ops MPS lacks run on the CPU (slower)"),
        (
            "true",
            Status.WARN,
            "PYTORCH_ENABLE_MPS_FALLBACK='true': only '1' turns the CPU fallback on",
        ),
    ],
)
def test_mps_fallback_values(value: str, status: Status, detail: str) -> None:
    fallback = _check(
        diagnose(_mac(environ={"PYTORCH_ENABLE_MPS_FALLBACK": value})), "mps fallback"
    )
    assert (fallback.status, found_text(fallback.found)) == (status, detail)


def test_mps_built_but_unavailable() -> None:
    diagnosis = diagnose(_mac(mps=False, mps_is_built=True, mac_release="12.1"))
    mps = _check(diagnosis, "mps")
    assert mps.status is Status.WARN
    assert found_text(mps.found) == (
        "MPS is built into torch but not available on this macOS 12.1: training runs on the CPU"
    )
    assert fix_text(mps.found) is not None
    assert "macOS 14.0 or later" in fix_text(mps.found)
    assert fix_text(mps.found).endswith(": update macOS, or use an arm64 Python")
    assert [s.device for s in diagnosis.steps] == ["cpu"]
    # no MPS: the no-GPU warning says training runs on the CPU
    assert found_text(_check(diagnosis, "cuda").found) == (
        "no GPU (no CUDA GPU, no MPS): training runs on the CPU"
    )


def test_no_gpu_at_all() -> None:
    diagnosis = diagnose(FakeProbe())
    cuda = _check(diagnosis, "cuda")
    assert (cuda.status, found_text(cuda.found)) == (
        Status.WARN,
        "no GPU (no CUDA GPU, no MPS): training runs on the CPU",
    )
    assert diagnosis.ok
    for name in ("driver", "bf16", "tf32", "nccl", "mps", "mps fallback"):
        assert _check(diagnosis, name).status is Status.SKIP


def test_steps_turned_off() -> None:
    probe = _h100_box()
    diagnosis = diagnose(probe, run_steps=False)
    assert diagnosis.steps == ()
    assert _check(diagnosis, "step cuda:0").status is Status.SKIP
    assert not any(call.startswith("tiny_train_step") for call in probe.calls)


def test_findings_are_typed_values() -> None:
    diagnosis = diagnose(_h100_box(nvml_cuda_driver=12080, cuda_version="13.0"))
    wheel = Wheel(driver_cuda=(12, 8), index=(12, 8))
    assert _check(diagnosis, "cuda").found == CudaFound(
        outcome=CudaOutcome.SEEN, count=1, wheel=wheel
    )
    assert _check(diagnosis, "driver").found == DriverFound(
        outcome=DriverOutcome.TOO_OLD,
        driver="580.159.04",
        driver_cuda="12.8",
        source="NVML",
        build="13.0",
        minimum="580",
        wheel=wheel,
    )


def test_real_diagnose_on_this_machine() -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only path")
    diagnosis = diagnose()
    assert not torch.cuda.is_initialized()
    assert diagnosis.ok
    assert diagnosis.torch_version == torch.__version__
    assert diagnosis.cuda_build == torch.version.cuda
    step = _check(diagnosis, "step cpu")
    assert step.status is Status.OK
    assert found_text(step.found).startswith("MLP forward+backward+AdamW, fp32, ")
    (reading,) = diagnosis.steps
    assert reading.device == "cpu" and reading.params_changed and reading.seconds > 0


@pytest.mark.gpu
def test_real_diagnose_on_a_gpu() -> None:
    diagnosis = diagnose()
    assert diagnosis.ok, [c for c in diagnosis.checks if c.status is Status.FAIL]
    assert len(diagnosis.gpus) == torch.cuda.device_count()
    assert [s.device for s in diagnosis.steps][:2] == ["cpu", "cuda:0"]
    assert _check(diagnosis, "driver").status is Status.OK
    assert _check(diagnosis, "nccl").status is Status.OK
