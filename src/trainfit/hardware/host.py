"""The local host's memory, for the CPU target's `fits` verdict.

Portable: `os.sysconf` (Linux and most POSIX systems), `sysctl -n hw.memsize` on macOS
(untested here), else unknown.
"""

from __future__ import annotations

import os
import subprocess
import sys


def total_ram_bytes() -> int | None:
    """Physical memory of this machine in bytes, or None when it cannot be found."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        pages = page = -1
    if pages > 0 and page > 0:
        return int(pages) * int(page)
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "hw.memsize"], capture_output=True, text=True, timeout=5
            )
            return int(out.stdout.strip())
        except (OSError, ValueError, subprocess.SubprocessError):
            return None
    return None


def available_ram_bytes() -> int | None:
    """Memory available for a new allocation without swapping (Linux `MemAvailable`), or None
    where the OS does not say (macOS: `vm_stat` would be needed; not read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
