"""`trainfit.monitor.sources`: the NVML sampler, against a fake pynvml."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from tests.monitor.support import GiB
from trainfit.monitor import GpuReading, NvmlSource
from trainfit.monitor.notes import CounterOff, NvmlFailed, NvmlMissing, NvmlNoMatch
from trainfit.monitor.oom_words import monitor_note_text


class _Handle:
    pass


def fake_pynvml(power_fails: bool = False, init_fails: bool = False) -> types.SimpleNamespace:
    def power(handle: object) -> int:
        if power_fails:
            raise RuntimeError("Not Supported")
        return 250_000

    def init() -> None:
        if init_fails:
            raise RuntimeError("Driver Not Loaded")

    return types.SimpleNamespace(
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: _Handle(),
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=93),
        nvmlDeviceGetPowerUsage=power,
        nvmlDeviceGetTemperature=lambda h, kind: 71,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=5 * GiB),
        NVML_TEMPERATURE_GPU=0,
    )


@pytest.fixture
def no_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace())
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_nvml_never_reads_another_gpu(no_uuid: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # without a UUID, index 0 of the visible GPUs need not be NVML's index 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    source = NvmlSource(torch.device("cuda", 0), nvml=fake_pynvml())
    assert source.read() == GpuReading()
    assert source.notes == [NvmlNoMatch(device="cuda:0")]
    assert "CUDA_VISIBLE_DEVICES set the index would name another GPU" in monitor_note_text(
        source.notes[0]
    )


def test_nvml_reads_counters(no_uuid: None) -> None:
    source = NvmlSource(torch.device("cuda", 0), nvml=fake_pynvml())
    assert source.read() == GpuReading(
        utilization_percent=93.0, power_watts=250.0, temperature_c=71.0, memory_used_bytes=5 * GiB
    )
    assert source.notes == []


def test_nvml_failing_counter_is_none_with_one_note(no_uuid: None) -> None:
    source = NvmlSource(torch.device("cuda", 0), nvml=fake_pynvml(power_fails=True))
    assert source.read().power_watts is None
    assert source.read().temperature_c == 71.0
    assert source.notes == [CounterOff(counter="power", error="Not Supported")]
    assert monitor_note_text(source.notes[0]) == "NVML power unavailable (Not Supported)"


def test_nvml_failing_init_gives_nones(no_uuid: None) -> None:
    source = NvmlSource(torch.device("cuda", 0), nvml=fake_pynvml(init_fails=True))
    assert source.read() == GpuReading()
    assert source.notes == [NvmlFailed(error="Driver Not Loaded")]
    assert monitor_note_text(source.notes[0]) == (
        "NVML failed (Driver Not Loaded): no utilisation, power or temperature"
    )


def test_nvml_missing_is_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    source = NvmlSource(torch.device("cuda", 0))
    assert source.read() == GpuReading()
    assert source.notes == [NvmlMissing()]
    assert "pip install nvidia-ml-py" in monitor_note_text(source.notes[0])
