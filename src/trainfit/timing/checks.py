"""What a modelled step time can be trusted to, as notes: its device family's check on held-out
public measurements, an Apple GPU's lack of one, and the shipped rules' blind check on the GPU
they were calibrated and timed on (`blind_check.json`, benchmarks/steptime/checked.py)."""

from __future__ import annotations

from collections.abc import Iterable

from trainfit.hardware.catalog import Device, DeviceKind
from trainfit.timing.basis import AppleUnchecked, BlindChecked, FamilyChecked, TimeNote
from trainfit.timing.constants import FamilyFit, blind_check


def family_notes(device: Device, fit: FamilyFit | None) -> list[TimeNote]:
    """What a step time on a device of a fitted family (or on an Apple GPU) can be trusted to."""
    apple = device.kind is DeviceKind.MPS
    if fit is not None and fit.heldout is not None:
        rows, median, worst = fit.heldout
        return [
            FamilyChecked(
                family=fit.family, rows=rows, median_error=median, worst_error=worst, apple=apple
            )
        ]
    return [AppleUnchecked()] if apple else []


def blind_notes(device: Device, training: bool, shipped: bool, synced: bool) -> list[TimeNote]:
    """The shipped rules' blind check, where a step time is what it checked: a training step
    (`training`: it has a backward) on the GPU the sets were timed on, modelled with the
    shipped calibration and no given factor (`shipped`), as a loop that never syncs (not
    `synced`)."""
    check = blind_check()
    if not training or not shipped or synced or device.name != check.device:
        return []
    if check.median_error is None or check.worst_error is None:  # NB: no set of these rules yet
        return []
    return [BlindChecked(device=device.display, check=check)]


def without_blind_check(notes: Iterable[TimeNote]) -> tuple[TimeNote, ...]:
    """`notes` less the blind check: for a time that is no longer the rules' own one-GPU
    prediction (scaled by a measured step, or a data-parallel step's throughput)."""
    return tuple(n for n in notes if not isinstance(n, BlindChecked))
