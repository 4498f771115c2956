"""NVML (nvidia-ml-py) for the doctor, `trainfit measure` and the monitor: one process-wide
session, and a GPU found by the UUID torch gives it.

`session()` initialises NVML once and keeps it (nvmlInit is reference-counted and costs a
fraction of a millisecond per call otherwise: a figure read at every phase of a timed step
would pay it each time); None without nvidia-ml-py or a working driver. `handle(device)` is
the NVML handle of a torch CUDA device, matched by UUID, because NVML numbers every GPU of the
machine and torch only the visible ones (`CUDA_VISIBLE_DEVICES`); by index only where nothing
is hidden and the counts agree; else None, never another GPU's handle.
"""

from __future__ import annotations

import os
from typing import Any

import torch

_SESSION: dict[str, Any] = {}


def session() -> Any:
    """The initialised `pynvml` module, or None (not installed, or NVML failing)."""
    if "module" not in _SESSION:
        try:
            import pynvml

            pynvml.nvmlInit()
            _SESSION["module"] = pynvml
        except Exception:  # NB: ImportError, or NVMLError of any kind: no NVML here
            _SESSION["module"] = None
    return _SESSION["module"]


def read(name: str, *args: Any) -> Any:
    """`pynvml.<name>(*args)`, or None without NVML or when the call fails."""
    nvml = session()
    if nvml is None:
        return None
    try:
        return getattr(nvml, name)(*args)
    except nvml.NVMLError:
        return None


_HANDLES: dict[tuple[int, int], Any] = {}


def handle(device: torch.device, nvml: Any = None) -> Any:
    """The NVML handle of CUDA device `device` (see the module), or None; looked up once per
    device for the process's session."""
    if nvml is None:
        nvml = session()
        if nvml is None:
            return None
        index = device.index if device.index is not None else torch.cuda.current_device()
        if (id(nvml), index) not in _HANDLES:
            _HANDLES[id(nvml), index] = _lookup(device, nvml)
        return _HANDLES[id(nvml), index]
    return _lookup(device, nvml)


def _lookup(device: torch.device, nvml: Any) -> Any:
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    if uuid is not None:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
        except Exception:  # NB: NVMLError_NotFound (MIG instances, other drivers)
            pass
    index = device.index if device.index is not None else torch.cuda.current_device()
    try:
        same = nvml.nvmlDeviceGetCount() == torch.cuda.device_count()
    except Exception:
        return None
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None or not same:
        return None
    try:
        return nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None


def process_bytes(device: torch.device) -> int | None:
    """This process's memory on `device` from NVML's running-process list (its CUDA context
    included), or None: no NVML, or this process not listed (a container, whose process ids
    NVML does not see)."""
    gpu = handle(device)
    processes = None if gpu is None else read("nvmlDeviceGetComputeRunningProcesses", gpu)
    pid = os.getpid()
    for process in processes or ():
        if process.pid == pid and process.usedGpuMemory is not None:
            return int(process.usedGpuMemory)
    return None


def device_used_bytes(device: torch.device) -> int | None:
    """Memory in use on the whole GPU (all processes), or None without NVML."""
    gpu = handle(device)
    info = None if gpu is None else read("nvmlDeviceGetMemoryInfo", gpu)
    return None if info is None else int(info.used)
