"""`trainfit doctor`: the CUDA, driver, MPS and NCCL paths through FakeProbe, the real probe
(and its real CPU training step) on this machine, the JSON, the renderer and the command."""

from __future__ import annotations

import argparse
import json
import math

import pytest
import torch

from trainfit.cli import doctor as doctor_command
from trainfit.hardware.probe import (
    CudaProperties,
    FakeGpu,
    FakeProbe,
    StepReading,
    TorchProbe,
    tiny_train_step,
)
from trainfit.measure.cuda_stack import has_kernels, wheel_for
from trainfit.measure.diagnosis import Check, Diagnosis, Status
from trainfit.measure.doctor import diagnose
from trainfit.measure.findings import CudaFound, CudaOutcome, DriverFound, DriverOutcome, Wheel
from trainfit.report.doctor import diagnosis_dict, render_doctor_text
from trainfit.report.doctor_words import fix_text, found_text, wheel_text

GiB = 1 << 30
H100_TOTAL = 85_017_493_504
H100_FREE = 84_465_090_560  # mem_get_info on an idle H100 (tests/fixtures/detect_h100.json)
ARCHES_CU130 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
CU128 = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu128"
CU124 = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu124"


def _gpu(name: str, total: int, cc: tuple[int, int], free: int | None) -> FakeGpu:
    props = CudaProperties(
        name=name, total_memory_bytes=total, compute_capability=cc, multiprocessor_count=100
    )
    return FakeGpu(properties=props, free_memory_bytes=free)


def _h100(free: int | None = H100_FREE) -> FakeGpu:
    return _gpu("NVIDIA H100 80GB HBM3", H100_TOTAL, (9, 0), free)


def _h100_box(probe_class: type[FakeProbe] = FakeProbe, **overrides: object) -> FakeProbe:
    """A healthy H100 box as the GPU machine has it: torch 2.11+cu130, driver 580."""
    values: dict[str, object] = {
        "gpus": (_h100(),),
        "cuda_version": "13.0",
        "nvml_driver": "580.159.04",
        "nvml_cuda_driver": 13000,
        "arch_list": ARCHES_CU130,
        "nccl": True,
        "nccl_ver": "2.27.7",
        "version": "2.11.0+cu130",
    }
    values.update(overrides)
    return probe_class(**values)  # type: ignore[arg-type]


def _mac(**overrides: object) -> FakeProbe:
    values: dict[str, object] = {
        "mps": True,
        "system_name": "Darwin",
        "mac_release": "14.5",
        "version": "2.11.0",
    }
    values.update(overrides)
    return FakeProbe(**values)  # type: ignore[arg-type]


def _check(diagnosis: Diagnosis, name: str) -> Check:
    (found,) = [c for c in diagnosis.checks if c.name == name]
    return found


def _statuses(diagnosis: Diagnosis) -> dict[str, str]:
    return {c.name: c.status.value for c in diagnosis.checks}


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trainfit")
    doctor_command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["doctor", *argv])


# --- scenarios through FakeProbe --------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("arch_list", "cc", "has"),
    [
        (("sm_80", "sm_90"), (9, 0), True),
        (("sm_80", "sm_90"), (8, 9), True),  # sm_80 code runs on every 8.x GPU
        (("sm_80", "sm_90"), (12, 0), False),
        (("sm_80", "compute_90"), (12, 0), True),  # PTX is compiled for later GPUs
        (("sm_90a", "sm_100f"), (10, 3), True),
        (("sm_86",), (8, 0), False),
    ],
)
def test_has_kernels(arch_list: tuple[str, ...], cc: tuple[int, int], has: bool) -> None:
    assert has_kernels(arch_list, cc) is has


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


@pytest.mark.parametrize(
    ("driver_cuda", "index"),
    [((13, 0), "cu130"), ((12, 7), "cu126"), ((12, 4), "cu124"), (None, "cu130")],
)
def test_the_wheel_is_the_newest_index_the_driver_runs(
    driver_cuda: tuple[int, int] | None, index: str
) -> None:
    assert wheel_text(wheel_for(driver_cuda)).startswith(
        f"pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/{index} "
    )


def test_the_wheel_for_a_driver_older_than_any_wheel() -> None:
    assert wheel_text(wheel_for((10, 2))) == (
        "upgrade the NVIDIA driver: it supports CUDA 10.2, older than any torch wheel (CUDA 11.8)"
    )


# --- JSON, rendering and the command ------------------------------------------------------------


def test_to_dict_is_json_ready() -> None:
    data = json.loads(json.dumps(diagnosis_dict(diagnose(_h100_box(gpus=(_h100(free=10 * GiB),))))))
    assert data["ok"] is True
    assert data["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "total_memory_bytes": H100_TOTAL,
            "free_memory_bytes": 10 * GiB,
            "compute_capability": [9, 0],
            "bf16": True,
        }
    ]
    assert data["checks"][3]["name"] == "cuda:0 memory"
    assert data["checks"][3]["status"] == "warn"
    assert data["steps"][1] == {
        "device": "cuda:0",
        "bf16_autocast": True,
        "loss": 1.3863,
        "params_changed": True,
        "seconds": 0.002,
    }


def test_render_healthy_h100() -> None:
    assert _lines(render_doctor_text(diagnose(_h100_box()))) == RENDERED_H100


def test_render_cpu_only_wheel() -> None:
    probe = FakeProbe(
        version="2.11.0+cpu",
        smi_gpus=("NVIDIA GeForce RTX 4060",),
        smi_driver="570.86.10",
        smi_cuda="12.8",
    )
    assert _lines(render_doctor_text(diagnose(probe))) == RENDERED_CPU_WHEEL


def test_cli_exit_codes_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor_command.run(_args(), probe=_h100_box()) == 0
    assert "12 checks: 10 ok, 0 warnings, 0 failed, 2 skipped -> the stack works" in (
        capsys.readouterr().out
    )
    assert doctor_command.run(_args(), probe=_mac()) == 0  # warnings do not fail
    capsys.readouterr()
    broken = _h100_box(step_errors={"cuda:0": "CUDA error: unspecified launch failure"})
    assert doctor_command.run(_args("--json"), probe=broken) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False
    assert {c["name"]: c["status"] for c in data["checks"]}["step cuda:0"] == "fail"
    assert doctor_command.run(_args("--json", "--no-step"), probe=broken) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == []


# --- the real probe on this machine -----------------------------------------------------------


def test_real_tiny_step_on_the_cpu() -> None:
    state = torch.get_rng_state()
    first = tiny_train_step("cpu", bf16_autocast=False)
    assert torch.equal(torch.get_rng_state(), state)  # the global random state is untouched
    again = TorchProbe().tiny_train_step("cpu", bf16_autocast=False)
    assert first.params_changed and math.isfinite(first.loss)
    assert first.loss == again.loss  # fixed seed: the same weights and batch
    # cross-entropy of 4 classes from a small random init starts near ln 4
    assert first.loss == pytest.approx(math.log(4), rel=0.1)
    bf16 = tiny_train_step("cpu", bf16_autocast=True)
    assert bf16.bf16_autocast and bf16.params_changed
    assert bf16.loss == pytest.approx(first.loss, rel=0.02)


def test_real_tiny_step_on_a_missing_device_raises() -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only path")
    with pytest.raises((RuntimeError, AssertionError), match=r"CUDA|Torch not compiled"):
        tiny_train_step("cuda:0", bf16_autocast=False)


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


RENDERED_H100 = [
    "torch 2.11.0+cu130, CUDA 13.0, driver 580.159.04 (CUDA 13.0), NCCL 2.27.7",
    "                                          trainfit doctor",
    "     ┃ check          ┃ result",
    "━━━━━╇━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━",
    "ok   │ torch          │ torch 2.11.0+cu130, built with CUDA 13.0",
    "ok   │ cuda           │ torch sees 1 CUDA GPU(s)",
    "ok   │ driver         │ driver 580.159.04 supports CUDA up to 13.0 (NVML); torch is built with CUDA",  # noqa: E501
    "     │                │ 13.0: they agree",
    "ok   │ cuda:0 memory  │ NVIDIA H100 80GB HBM3, 79.18 GiB total, 78.66 GiB free",
    "ok   │ cuda:0 kernels │ sm_90: this torch has kernels for it",
    "skip │ mps            │ not a Mac (Linux)",
    "skip │ mps fallback   │ not a Mac",
    "ok   │ bf16           │ native bf16 on every GPU",
    "ok   │ tf32           │ supported on every GPU; off for fp32 matmuls (precision 'highest';",
    "     │                │ torch.set_float32_matmul_precision('high') turns it on)",
    "ok   │ nccl           │ NCCL 2.27.7",
    "ok   │ step cpu       │ MLP forward+backward+AdamW, fp32, 2.0 ms: loss 1.3863 finite, parameters",  # noqa: E501
    "     │                │ updated",
    "ok   │ step cuda:0    │ MLP forward+backward+AdamW, bf16 autocast, 2.0 ms: loss 1.3863 finite,",  # noqa: E501
    "     │                │ parameters updated",
    "12 checks: 10 ok, 0 warnings, 0 failed, 2 skipped -> the stack works",
]
RENDERED_CPU_WHEEL = [
    "torch 2.11.0+cpu, no CUDA build, driver 570.86.10 (CUDA 12.8)",
    "                                          trainfit doctor",
    "     ┃ check        ┃ result",
    "━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━",
    "ok   │ torch        │ torch 2.11.0+cpu, no CUDA in this build",
    "FAIL │ cuda         │ torch 2.11.0+cpu is a CPU-only build, but nvidia-smi sees 1 GPU(s): NVIDIA",  # noqa: E501
    "     │              │ GeForce RTX 4060",
    "skip │ driver       │ torch is not built with CUDA",
    "skip │ mps          │ not a Mac (Linux)",
    "skip │ mps fallback │ not a Mac",
    "skip │ bf16         │ no CUDA GPU",
    "skip │ tf32         │ no CUDA GPU",
    "skip │ nccl         │ no CUDA GPU",
    "ok   │ step cpu     │ MLP forward+backward+AdamW, fp32, 2.0 ms: loss 1.3863 finite, parameters",  # noqa: E501
    "     │              │ updated",
    "to fix:",
    "cuda: install a CUDA build of torch: pip install --force-reinstall torch --index-url",
    "      https://download.pytorch.org/whl/cu128 (none for your torch release?",
    "      https://pytorch.org/get-started/previous-versions/ lists each release's indexes)",
    "9 checks: 2 ok, 0 warnings, 1 failed, 6 skipped -> the stack is broken; fix the failures above",  # noqa: E501
]
