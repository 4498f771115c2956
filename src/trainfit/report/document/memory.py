"""Each device's memory for the report: the breakdown at the chosen micro-batch and the
memory-against-micro-batch curve, from the scaling the plan kept (`Plan.scalings`).

No new trace is made when the plan's scaling is affine (the usual case): each point is an
allocator replay of the traced events resized to the micro-batch, as the plan's own search
replays them.

Known limitations: a step whose events are not affine in the micro-batch gets its curve from
the micro-batches the plan's search replayed only, and its breakdown from one new trace; the
CPU (planned from full CPU estimates, not a scaling) and devices without a setting get no
breakdown or curve, only the plan's note.
"""

from __future__ import annotations

import dataclasses

from trainfit.estimator.scaling import BatchScaling
from trainfit.estimator.step import gpu_memory
from trainfit.hardware.catalog import get_device
from trainfit.memory.replay import WORKSPACES
from trainfit.plan.options import DevicePlan, Plan
from trainfit.plan.words import note_text
from trainfit.report.document.model import CurvePoint, DeviceMemory
from trainfit.trace.step import Category

CURVE_CAP = 1 << 17
"""The largest micro-batch on a curve (twice the plan's search limit)."""


def device_memory(plan: Plan, d: DevicePlan) -> DeviceMemory:
    """The breakdown and curve of `d` (see the module), or a note saying why there is none."""
    device = get_device(d.device)
    limit = device.memory_bytes or None
    usable = None if limit is None else int(limit * (1.0 - plan.margin))
    scaling = plan.scalings.get(d.device)
    if d.setting is None or scaling is None:
        if d.setting is None:
            note = note_text(d) or d.verdict.value
        else:
            note = "no breakdown kept for this device (the CPU is planned from full estimates)"
        return DeviceMemory(
            device=d.device,
            display=d.display,
            limit_bytes=limit,
            usable_bytes=usable,
            micro_batch=0,
            note=note,
        )
    micro = d.setting.micro_batch
    return DeviceMemory(
        device=d.device,
        display=d.display,
        limit_bytes=limit,
        usable_bytes=usable,
        micro_batch=micro,
        breakdown=breakdown(scaling, micro),
        curve=curve(scaling, micro, d.max_micro_batch, usable or 0),
    )


def breakdown(scaling: BatchScaling, batch: int) -> tuple[tuple[str, int], ...]:
    """(component, bytes) at the peak of micro-batch `batch`, as `estimate()` breaks it down;
    the components sum to `scaling.needed_bytes(batch)`."""
    spec = dataclasses.replace(scaling.spec, batch=batch)
    result, context = gpu_memory(scaling.trace_at(batch), spec, scaling.device)
    live = result.live_at_peak
    return (
        ("parameters", live.get(Category.PARAMETERS.value, 0)),
        ("gradients", live.get(Category.GRADIENTS.value, 0)),
        ("optimizer state", live.get(Category.OPTIMIZER_STATE.value, 0)),
        ("activations", live.get(Category.ACTIVATIONS.value, 0)),
        ("temporaries", live.get(Category.TEMPORARIES.value, 0)),
        ("workspaces", live.get(WORKSPACES, 0)),
        ("allocator overhead", result.peak_reserved_bytes - result.peak_allocated_bytes),
        ("runtime context", context),
    )


def curve(scaling: BatchScaling, micro: int, largest: int, usable: int) -> tuple[CurvePoint, ...]:
    """Memory needed at powers of two up to twice the largest micro-batch that fits, and at
    the chosen micro-batch, the largest and the one past it; whether each fits `usable`."""
    top = min(CURVE_CAP, 2 * max(micro, largest, 4))
    batches = {1 << k for k in range(top.bit_length()) if 1 << k <= top}
    batches |= {b for b in (micro, largest, largest + 1) if 1 <= b <= top}
    if not scaling.affine:
        # NB: each batch would be a new trace: only those the plan's search replayed
        key = scaling.device.runtime_key
        known = {
            k[1]
            for k in scaling.memo
            if k[0] == "needed" and isinstance(k[1], int) and tuple(k[2:]) == key
        }
        batches = {b for b in batches if b in known} | {micro}
    return tuple(
        CurvePoint(
            micro_batch=b, needed_bytes=scaling.needed_bytes(b), fits=scaling.fits(b, usable)
        )
        for b in sorted(batches)
    )
