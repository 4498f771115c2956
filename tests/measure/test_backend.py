"""`trainfit.measure.backend`: out of memory told from other errors, and the CUDA backend's
count of the context (torch.cuda and NVML faked)."""

from __future__ import annotations

import pytest
import torch

from tests.measure.fakes import GiB
from trainfit.measure.backend import is_out_of_memory


def test_out_of_memory_is_told_from_other_errors():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not is_out_of_memory(ValueError("out of memory"))


@pytest.fixture
def fake_torch_cuda(monkeypatch):
    """torch.cuda as a card with 10 GiB held by other processes; set_device adds this
    process's 0.5 GiB context."""
    state = {"used": 10 * GiB}
    patches = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda d: state.update(used=state["used"] + GiB // 2),
        "mem_get_info": lambda d=None: (80 * GiB - state["used"], 80 * GiB),
        "reset_peak_memory_stats": lambda d=None: None,
        "max_memory_allocated": lambda d=None: GiB,
        "max_memory_reserved": lambda d=None: 2 * GiB,
        "synchronize": lambda d=None: None,
        "empty_cache": lambda: None,
    }
    for name, fn in patches.items():
        monkeypatch.setattr(torch.cuda, name, fn)
    return state


@pytest.mark.parametrize(
    ("process_listed", "device_figure", "expected", "method"),
    [
        (True, True, 2 * GiB + GiB // 2, "NVML: this process's memory"),
        (False, True, 2 * GiB + GiB // 2, "NVML does not list this process"),
        (False, False, 2 * GiB, "CUDA context (about 0.5 GiB) is NOT counted"),
    ],
)
def test_cuda_backend_counts_the_context_where_it_can(
    fake_torch_cuda, monkeypatch, process_listed, device_figure, expected, method
):
    import trainfit.measure.backend as backend_module

    state = fake_torch_cuda
    monkeypatch.setattr(
        backend_module.nvml,
        "process_bytes",
        lambda d: state["used"] - 10 * GiB if process_listed else None,
    )
    monkeypatch.setattr(
        backend_module.nvml,
        "device_used_bytes",
        lambda d: state["used"] if device_figure else None,
    )
    backend = backend_module.CudaBackend(torch.device("cuda"))
    backend.start()
    state["used"] += 2 * GiB  # the steps reserve 2 GiB
    allocated, reserved, used = backend.take_peaks()
    assert (allocated, reserved, used) == (GiB, 2 * GiB, expected)
    assert method in backend.used_method
