"""Local detection: the CUDA and MPS paths through FakeProbe, the real probe on this machine,
the replay of a recording made on a real H100, the renderer and `trainfit detect`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from trainfit.cli.main import main
from trainfit.errors import UnknownNameError
from trainfit.hardware import detect
from trainfit.hardware.catalog import Device, DeviceKind, get_device
from trainfit.hardware.detect import (
    CpuInfo,
    CudaGpu,
    FreeMemoryUnknown,
    Matched,
    MatchHow,
    MpsDevice,
    MpsUnavailable,
    NoCudaGpu,
    NoMpsLimit,
    OtherKind,
    OtherMemory,
    Source,
    Unmatched,
    detect_local,
    match_catalog,
)
from trainfit.hardware.detect_words import matching_text
from trainfit.hardware.host import total_ram_bytes
from trainfit.hardware.probe import CudaProperties, FakeGpu, FakeProbe
from trainfit.report.local import local_machine_dict, render_local_text

GiB = 1 << 30
MiB = 1 << 20
H100_FIXTURE = Path(__file__).parents[1] / "fixtures" / "detect_h100.json"
CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7R13 Processor\n"


def _h100(free: int | None = 84_500_000_000) -> FakeGpu:
    return FakeGpu(
        properties=CudaProperties(
            name="NVIDIA H100 80GB HBM3",
            total_memory_bytes=85_017_493_504,
            compute_capability=(9, 0),
            multiprocessor_count=132,
        ),
        free_memory_bytes=free,
    )


def _rtx4060() -> FakeGpu:
    return FakeGpu(
        properties=CudaProperties(
            name="NVIDIA GeForce RTX 4060",
            total_memory_bytes=8188 * MiB,
            compute_capability=(8, 9),
            multiprocessor_count=24,
        ),
        free_memory_bytes=7500 * MiB,
    )


def _m2(recommended: int | None = 11_453_251_584) -> FakeProbe:
    return FakeProbe(
        mps=True,
        mps_recommended=recommended,
        system_name="Darwin",
        processor_name="arm",
        sysctl_values={"machdep.cpu.brand_string": "Apple M2", "hw.memsize": str(16 * GiB)},
        logical_cores=8,
        usable_cores=None,
        ram_bytes=16 * GiB,
    )


def _apple_row(name: str, memory: int) -> Device:
    return Device(
        name=name,
        display="Apple M2 16GB",
        kind=DeviceKind.MPS,
        memory_bytes=memory,
        compute_capability=(0, 0),
        architecture="apple",
        runtime_profile="mps",
        memory_source="test",
        spec_source="test",
        aliases=("apple m2 16gb",),
    )


def _with_m2_row(name: str) -> Device:
    """The catalog lookup plus one Apple row, whatever the shipped catalog holds."""
    if "".join(ch for ch in name.lower() if ch.isalnum()) in {"applem216gb", "m216gb"}:
        return _apple_row("m2-16gb", 16 * GiB)
    return get_device(name)


def _without_mps_rows(name: str) -> Device:
    """The catalog lookup with every Apple (mps) row hidden."""
    device = get_device(name)
    if device.kind is DeviceKind.MPS:
        raise UnknownNameError("device", name, ())
    return device


def test_fake_h100_exact() -> None:
    probe = FakeProbe(
        gpus=(_h100(),), cuda_version="13.0", nvml_driver="580.159.04", smi_driver="580.0"
    )
    machine = detect_local(probe)
    assert machine.cuda_gpus == (
        CudaGpu(
            index=0,
            name="NVIDIA H100 80GB HBM3",
            total_memory_bytes=85_017_493_504,
            free_memory_bytes=84_500_000_000,
            compute_capability=(9, 0),
            multiprocessor_count=132,
            catalog_match="h100",
            matching=Matched(row="h100", how=MatchHow.NAME_AND_MEMORY),
        ),
    )
    assert machine.cuda_runtime_version == "13.0"
    assert (machine.driver_version, machine.driver_version_source) == ("580.159.04", Source.NVML)
    assert "nvidia_smi_driver_version" not in probe.calls  # NVML answered first
    assert machine.mps is None
    assert machine.notes == ()


def test_fake_rtx4060_driver_from_nvidia_smi() -> None:
    probe = FakeProbe(gpus=(_rtx4060(),), cuda_version="12.8", smi_driver="570.86.10")
    machine = detect_local(probe)
    (gpu,) = machine.cuda_gpus
    assert gpu.catalog_match == "rtx-4060"
    assert gpu.matching == Matched(row="rtx-4060", how=MatchHow.NAME_AND_MEMORY)
    assert (gpu.total_memory_bytes, gpu.free_memory_bytes) == (8188 * MiB, 7500 * MiB)
    assert (gpu.compute_capability, gpu.multiprocessor_count) == ((8, 9), 24)
    assert (machine.driver_version, machine.driver_version_source) == (
        "570.86.10",
        Source.NVIDIA_SMI,
    )


def test_two_gpus_driver_unknown() -> None:
    machine = detect_local(FakeProbe(gpus=(_h100(), _rtx4060()), cuda_version="12.8"))
    assert [(g.index, g.catalog_match) for g in machine.cuda_gpus] == [(0, "h100"), (1, "rtx-4060")]
    assert (machine.driver_version, machine.driver_version_source) == (None, Source.UNKNOWN)


def test_no_gpu_does_not_touch_cuda() -> None:
    probe = FakeProbe(cpuinfo_text=CPUINFO)
    machine = detect_local(probe)
    assert machine.cuda_gpus == ()
    assert (machine.driver_version, machine.driver_version_source) == (None, Source.NOT_PROBED)
    assert machine.notes == (NoCudaGpu(torch_version="2.13.0", runtime=None),)
    touched = {"cuda_properties", "cuda_free_memory", "nvml_driver_version"}
    assert touched.isdisjoint(probe.calls)
    assert "nvidia_smi_driver_version" not in probe.calls


def test_cuda_build_without_gpu_note() -> None:
    machine = detect_local(FakeProbe(cuda_version="12.8"))
    assert machine.notes == (NoCudaGpu(torch_version="2.13.0", runtime="12.8"),)


def test_free_memory_failure_is_a_note() -> None:
    machine = detect_local(FakeProbe(gpus=(_h100(free=None),), cuda_version="13.0"))
    assert machine.cuda_gpus[0].free_memory_bytes is None
    assert machine.notes == (
        FreeMemoryUnknown(
            index=0, error="CUDA error: all CUDA-capable devices are busy or unavailable"
        ),
    )


def test_memory_mismatch_rejects_the_row() -> None:
    fake = FakeGpu(
        properties=CudaProperties(
            name="NVIDIA H100 80GB HBM3",
            total_memory_bytes=40 * GiB,
            compute_capability=(9, 0),
            multiprocessor_count=132,
        ),
        free_memory_bytes=39 * GiB,
    )
    (gpu,) = detect_local(FakeProbe(gpus=(fake,), cuda_version="13.0")).cuda_gpus
    assert gpu.catalog_match is None
    assert gpu.matching == Unmatched(
        name="NVIDIA H100 80GB HBM3",
        rejected=(OtherMemory(row="h100", row_bytes=85_017_493_504, found_bytes=40 * GiB),),
    )
    assert matching_text(gpu.matching) == (
        "no catalog row for 'NVIDIA H100 80GB HBM3'; described as found "
        "(name matched but 'h100' has 79.2 GiB, this one 40.0 GiB)"
    )


def test_unknown_gpu_is_described_as_found() -> None:
    fake = FakeGpu(
        properties=CudaProperties(
            name="NVIDIA Imaginary Z9",
            total_memory_bytes=5 * GiB,
            compute_capability=(7, 5),
            multiprocessor_count=10,
        ),
        free_memory_bytes=4 * GiB,
    )
    (gpu,) = detect_local(FakeProbe(gpus=(fake,), cuda_version="12.1")).cuda_gpus
    assert (gpu.name, gpu.total_memory_bytes, gpu.catalog_match) == (
        "NVIDIA Imaginary Z9",
        5 * GiB,
        None,
    )
    assert isinstance(gpu.matching, Unmatched) and gpu.matching.name == "NVIDIA Imaginary Z9"
    assert not gpu.matching.rejected


def test_kind_must_agree() -> None:
    # The catalog's CPU row must never stand for a GPU that happens to be called "cpu".
    rejected = OtherKind(row="cpu", row_kind=DeviceKind.CPU, kind="cuda")
    assert match_catalog("cpu", "cuda", None) == (
        None,
        Unmatched(name="cpu", rejected=(rejected,)),
    )
    assert matching_text(Unmatched(name="cpu", rejected=(rejected,))) == (
        "no catalog row for 'cpu'; described as found (name matched but 'cpu' is a cpu row, "
        "not cuda)"
    )


def test_fake_m2_mps_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    # NB: a stand-in catalog row, so that this test does not depend on which Apple rows ship.
    monkeypatch.setattr(detect, "get_device", _with_m2_row)
    probe = _m2()
    machine = detect_local(probe)
    assert machine.mps == MpsDevice(
        chip="Apple M2",
        chip_source=Source.SYSCTL_BRAND,
        unified_memory_bytes=16 * GiB,
        unified_memory_source=Source.SYSCTL_MEMSIZE,
        recommended_max_memory_bytes=11_453_251_584,
        recommended_max_memory_source=Source.TORCH_MPS_RECOMMENDED,
        catalog_match="m2-16gb",
        matching=Matched(row="m2-16gb", how=MatchHow.NAME_AND_MEMORY),
    )
    assert machine.cpu == CpuInfo(
        model="Apple M2",
        model_source=Source.SYSCTL_BRAND,
        logical_cores=8,
        usable_cores=None,
        usable_cores_source=Source.UNKNOWN,
        total_ram_bytes=16 * GiB,
        torch_threads=8,
        catalog_match="cpu",
        matching=Matched(row="cpu", how=MatchHow.CPU_HOST),
    )
    assert machine.notes == (NoCudaGpu(torch_version="2.13.0", runtime=None),)


def test_fake_m2_without_catalog_row_or_recommended_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "get_device", _without_mps_rows)
    machine = detect_local(_m2(recommended=None))
    assert machine.mps is not None
    assert (machine.mps.catalog_match, machine.mps.recommended_max_memory_source) == (
        None,
        Source.UNKNOWN,
    )
    assert isinstance(machine.mps.matching, Unmatched)
    assert machine.mps.matching.name == "Apple M2"
    assert machine.notes[-1] == NoMpsLimit(torch_version="2.13.0")


def test_mps_unavailable_on_a_mac_is_noted() -> None:
    machine = detect_local(FakeProbe(system_name="Darwin", sysctl_values={}))
    assert machine.mps is None
    assert MpsUnavailable() in machine.notes


@pytest.mark.parametrize(
    ("probe", "model", "source"),
    [
        (FakeProbe(cpuinfo_text=CPUINFO), "AMD EPYC 7R13 Processor", Source.PROC_CPUINFO),
        (
            FakeProbe(cpuinfo_text="Hardware\t: BCM\n", processor_name="aarch64"),
            "aarch64",
            Source.PLATFORM_PROCESSOR,
        ),
        (
            FakeProbe(system_name="Windows", processor_name="Intel64 Family 6 Model 154"),
            "Intel64 Family 6 Model 154",
            Source.PLATFORM_PROCESSOR,
        ),
        (FakeProbe(cpuinfo_text=None), None, Source.UNKNOWN),
    ],
)
def test_cpu_model_sources(probe: FakeProbe, model: str | None, source: Source) -> None:
    cpu = detect_local(probe).cpu
    assert (cpu.model, cpu.model_source) == (model, source)


def test_real_probe_on_this_machine() -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only path")
    machine = detect_local()
    assert machine.cuda_gpus == ()
    assert not torch.cuda.is_initialized()
    assert machine.cpu.logical_cores == os.cpu_count()
    assert machine.cpu.total_ram_bytes == total_ram_bytes()
    assert machine.cpu.total_ram_bytes and machine.cpu.total_ram_bytes > 0
    assert machine.cpu.torch_threads == torch.get_num_threads()
    assert machine.cpu.catalog_match == "cpu"
    if hasattr(os, "sched_getaffinity"):
        assert machine.cpu.usable_cores == len(os.sched_getaffinity(0))


def test_replay_of_the_h100_recording() -> None:
    """The readings recorded on a real H100 give, through FakeProbe, what was detected there."""
    record = json.loads(H100_FIXTURE.read_text())
    raw, detected = record["raw"], record["detected"]
    assert record["cuda_initialised_after_count"] is False
    probe = FakeProbe(
        gpus=tuple(
            FakeGpu(
                properties=CudaProperties(
                    name=g["name"],
                    total_memory_bytes=g["total_memory_bytes"],
                    compute_capability=tuple(g["compute_capability"]),
                    multiprocessor_count=g["multiprocessor_count"],
                ),
                free_memory_bytes=g["free_memory_bytes"],
            )
            for g in raw["gpus"]
        ),
        cuda_version=raw["cuda_version"],
        nvml_driver=raw["nvml_driver"],
        smi_driver=raw["smi_driver"],
        mps=raw["mps"],
        system_name=raw["system"],
        processor_name=raw["processor"],
        cpuinfo_text=f"model name\t: {detected['cpu']['model']}\n",
        logical_cores=raw["cpu_count"],
        usable_cores=raw["usable_cpu_count"],
        ram_bytes=raw["total_ram_bytes"],
        threads=raw["torch_threads"],
        version=raw["torch_version"],
    )
    assert local_machine_dict(detect_local(probe)) == detected
    assert detected["cuda_gpus"][0]["catalog_match"] == "h100"


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def test_render_h100_machine() -> None:
    probe = FakeProbe(
        gpus=(_h100(),),
        cuda_version="13.0",
        nvml_driver="580.159.04",
        cpuinfo_text=CPUINFO,
        logical_cores=16,
        usable_cores=16,
        ram_bytes=128 * GiB,
        threads=16,
    )
    assert _lines(render_local_text(detect_local(probe))) == RENDERED_H100


def test_render_unmatched_mps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "get_device", _without_mps_rows)
    assert _lines(render_local_text(detect_local(_m2()))) == RENDERED_M2


@pytest.mark.gpu
def test_real_probe_on_a_gpu() -> None:
    machine = detect_local()
    assert len(machine.cuda_gpus) == torch.cuda.device_count()
    for gpu in machine.cuda_gpus:
        props = torch.cuda.get_device_properties(gpu.index)
        assert (gpu.name, gpu.total_memory_bytes) == (props.name, props.total_memory)
        assert gpu.free_memory_bytes is not None
        assert 0 < gpu.free_memory_bytes <= gpu.total_memory_bytes
    assert machine.cuda_runtime_version == torch.version.cuda
    assert machine.driver_version_source in {Source.NVML, Source.NVIDIA_SMI}


def test_cli_detect(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps cells to the terminal's width
    assert main(["detect"]) == 0
    out = capsys.readouterr().out
    assert "this machine" in out
    assert f"/{os.cpu_count()} cores usable" in out
    assert main(["detect", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cpu"]["logical_cores"] == os.cpu_count()
    assert data["cpu"]["total_ram_bytes"] == total_ram_bytes()
    assert data["cpu"]["catalog_match"] == "cpu"
    assert len(data["cuda_gpus"]) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)


RENDERED_H100 = [
    "torch 2.13.0, CUDA runtime 13.0, driver 580.159.04 via NVML (nvidia-ml-py)",
    "                                            this machine",
    "       ┃ device               ┃ memory         ┃ usable now     ┃ details              ┃ catalog row",  # noqa: E501
    "━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━",
    "cuda:0 │ NVIDIA H100 80GB     │ 79.18 GiB      │ 78.70 GiB free │ cc 9.0, 132 SMs      │ h100",
    "       │ HBM3                 │                │                │                      │",
    "cpu    │ AMD EPYC 7R13        │ 128.00 GiB RAM │ -              │ 16/16 cores usable,  │ cpu",
    "       │ Processor            │                │                │ 16 torch threads     │",
    "sources: cpu model from /proc/cpuinfo; GPU free memory from torch.cuda.mem_get_info",
    "",
]
RENDERED_M2 = [
    "torch 2.13.0, no CUDA runtime",
    "                                            this machine",
    "    ┃ device   ┃ memory            ┃ usable now            ┃ details                   ┃ catalog row",  # noqa: E501
    "━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━",
    "mps │ Apple M2 │ 16.00 GiB unified │ 10.67 GiB Metal limit │ -                         │ -",
    "cpu │ Apple M2 │ 16.00 GiB RAM     │ -                     │ ?/8 cores usable, 8 torch │ cpu",
    "    │          │                   │                       │ threads                   │",
    "sources: cpu model from sysctl -n machdep.cpu.brand_string; MPS chip from sysctl -n",
    "machdep.cpu.brand_string, memory from sysctl -n hw.memsize, recommended limit from",
    "torch.mps.recommended_max_memory()",
    "mps: no catalog row for 'Apple M2'; described as found",
    "note: no CUDA GPU: torch 2.13.0 is built without CUDA",
    "",
]
