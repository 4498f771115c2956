"""This process's resident set: now, and its high-water mark since a reset (Linux /proc).

On Linux the kernel's RSS high-water mark (VmHWM) is reset to the current RSS by writing 5 to
/proc/self/clear_refs; where that is refused (macOS, some kernels) the mark is `ru_maxrss`, the
process's peak since it started.
"""

from __future__ import annotations

import os
import resource
import sys

from trainfit.errors import MeasureError

CLEAR_REFS = "/proc/self/clear_refs"
STATUS = "/proc/self/status"


def current_rss_bytes() -> int | None:
    """This process's resident set now (Linux /proc), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def maxrss_bytes() -> int:
    raw = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return raw if sys.platform == "darwin" else raw * 1024  # NB: kB on Linux, bytes on macOS


class HighWater:
    """The RSS high-water mark since the last reset."""

    def __init__(self) -> None:
        self.resettable = self._reset()

    def _reset(self) -> bool:
        try:
            with open(CLEAR_REFS, "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def take(self) -> int:
        """The high-water mark in bytes since the last call (or the start), then reset it."""
        if not self.resettable:
            return maxrss_bytes()
        peak = _vm_hwm_bytes()
        self._reset()
        return peak


def _vm_hwm_bytes() -> int:
    with open(STATUS) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise MeasureError("/proc/self/status has no VmHWM line")
