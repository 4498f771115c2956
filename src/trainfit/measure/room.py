"""Whether a real step has room on a busy device, checked against its estimate before it runs.

A GPU another process holds memory on may not have what the estimate needs: the step would run
out of memory part-way. The check says how much is free, who holds the rest, and the largest
micro-batch that fits in what is free (estimated), before anything is allocated.
"""

from __future__ import annotations

from trainfit.errors import MeasureError
from trainfit.estimator.result import Estimate
from trainfit.estimator.scaling import max_micro_batch
from trainfit.hardware import nvml
from trainfit.hardware.catalog import DeviceKind
from trainfit.hardware.units import GIB
from trainfit.measure.backend import Backend
from trainfit.spec import TrainSpec


def check_room(spec: TrainSpec, backend: Backend, estimate: Estimate) -> None:
    """MeasureError when the estimate needs more than the device has free (a busy GPU)."""
    free = backend.free_memory()
    if (
        backend.kind == DeviceKind.CPU
        or free is None
        or estimate.device_memory_needed_bytes <= free
    ):
        return
    total = backend.total_memory() or free
    fits = max_micro_batch(spec, margin=max(0.0, 1.0 - free / estimate.device.memory_bytes))
    own = nvml.process_bytes(backend.device) if backend.kind == DeviceKind.CUDA else None
    others = max(0, total - free - (own or 0))
    held_by = (
        "other processes hold"
        if own is not None
        else "other processes and this one's CUDA context hold"
    )
    advice = (
        f"micro-batch {fits.batch} fits in what is free (estimated): use --batch {fits.batch}"
        if fits.batch
        else "not even micro-batch 1 fits in what is free"
    )
    raise MeasureError(
        f"{backend.name()} has {free / GIB:.2f} GiB free of {total / GIB:.2f} GiB ({held_by} "
        f"{others / GIB:.2f} GiB) and this step needs about "
        f"{estimate.device_memory_needed_bytes / GIB:.2f} GiB (estimated); {advice}, free the "
        "GPU, or pass --force to try anyway"
    )


__all__ = ["check_room"]
