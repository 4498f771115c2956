"""The doctor tests' fake boxes: a healthy H100 box as the GPU machine has it, a Mac, a GPU."""

from __future__ import annotations

from trainfit.hardware.probe import CudaProperties, FakeGpu, FakeProbe

GiB = 1 << 30
H100_TOTAL = 85_017_493_504
H100_FREE = 84_465_090_560  # mem_get_info on an idle H100 (tests/fixtures/detect_h100.json)
ARCHES_CU130 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


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
