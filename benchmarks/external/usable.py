"""What a consumer NVIDIA card shows to PyTorch, from the corpus's out-of-memory messages.

Two figures, each fitted on the calibration rows only (the corpus's split rule) and checked on
the held-out rows:

- **visible memory** (torch's `total_memory`, the "total capacity" of CUDA's out-of-memory
  message) against the box's GB: `reservation GiB = a + b * box GB`, least squares over the
  GeForce rows whose message was printed by Linux's driver. Windows (WDDM) prints the box itself
  (8.00, 10.00 GiB) and lets allocations spill into shared memory: those rows are kept out, with
  the reason.
- **the CUDA context** (memory the process holds outside PyTorch's allocator): the messages of
  PyTorch 2.1 and later say what the process holds ("this process has X GiB memory in use"),
  what PyTorch allocated and what it reserved unallocated; the difference is the context. It
  grows with the streaming multiprocessors (per-SM local memory), so `context GiB = c + d * SMs`,
  SMs = CUDA cores / 128 (Ampere, Ada and Blackwell GeForce SMs have 128 FP32 lanes), cores from
  the `cybird-table` source of device_specs.yaml. Older messages (total, reserved, free) bound
  the context plus other processes (the desktop's display) from above; they are listed, not
  fitted.

`python -m benchmarks.external.usable` prints the fit and writes results/usable_memory.md and
results/usable_memory.json (the constants trainfit's catalog carries).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.external.load import CorpusRow, load_corpus

HERE = Path(__file__).parent
RESULTS = HERE / "results"
CONSUMER = ("consumer-ampere", "consumer-ada", "consumer-blackwell", "consumer-older")

BOX_GB = {
    "rtx-2060": 6, "rtx-3060": 12, "rtx-3060-laptop": 6, "rtx-3060-ti": 8, "rtx-3070": 8,
    "rtx-3080": 10, "rtx-3090": 24, "rtx-4050-laptop": 6, "rtx-4060-laptop": 8, "rtx-4070-ti": 12,
    "rtx-4090": 24, "rtx-5090": 32,
}  # fmt: skip
"""The box's memory of each device key with an out-of-memory row (the corpus's `device`)."""

CUDA_CORES = {
    "rtx-3060": 3584, "rtx-3060-laptop": 3840, "rtx-3070": 5888, "rtx-3080": 8704,
    "rtx-3090": 10496, "rtx-4050-laptop": 2560, "rtx-4060-laptop": 3072, "rtx-4070-ti": 7680,
    "rtx-4090": 16384, "rtx-5090": 21760,
}  # fmt: skip
"""CUDA cores from the cybird-table source (device_specs.yaml); SMs = cores / 128."""

WDDM = {
    "oom-dreamdiffusion-24-rtx3060ti": "Windows (WDDM) prints the box (8.00 GiB) and spills into "
    "shared memory: allocated and reserved exceed the total",
    "oom-peacasso-3-rtx3080": "Windows-style capacity: the box itself (10.00 GiB)",
}
"""Rows kept out of the visible-memory fit, with why."""

_SIZE = re.compile(r"([\d.]+)\s*(bytes|KiB|KB|MiB|MB|GiB|GB)")
_UNIT = {"bytes": 2**-30, "KiB": 2**-20, "MiB": 2**-10, "GiB": 1.0}
_UNIT |= {"KB": _UNIT["KiB"], "MB": _UNIT["MiB"], "GB": _UNIT["GiB"]}
# NB: PyTorch's format_size divides by 1024 whatever it prints ("GB" in older MPS builds)


def gib(text: str | float | None) -> float | None:
    """A size of an out-of-memory message ('279.12 MiB', '18.13 GB', 0.5) in GiB."""
    if text is None or isinstance(text, (int, float)):
        return text
    match = _SIZE.search(str(text))
    if match is None:
        raise ValueError(f"not a size: {text!r}")
    return float(match.group(1)) * _UNIT[match.group(2)]


@dataclass(frozen=True, kw_only=True, slots=True)
class OomRow:
    id: str
    split: str
    device_key: str
    laptop: bool
    box_gb: int
    total_gib: float
    context_gib: float | None
    """Process in use - allocated - reserved unallocated (new-style messages)."""
    outside_gib: float | None
    """Total - reserved - free (old-style messages): the context plus other processes."""
    sms: int | None


def oom_rows(rows: list[CorpusRow]) -> list[OomRow]:
    found = []
    for row in rows:
        extra = row.extra
        total = extra.get("total_capacity_gib")
        if row.family not in CONSUMER or total is None or row.device_key not in BOX_GB:
            continue
        free = gib(extra.get("free"))
        context = outside = None
        if extra.get("process_in_use_gib") is not None:
            context = (
                extra["process_in_use_gib"]
                - extra["already_allocated_gib"]
                - gib(extra["reserved_unallocated"])
            )
        elif extra.get("reserved_gib") is not None and free is not None:
            outside = total - extra["reserved_gib"] - free
        cores = CUDA_CORES.get(row.device_key)
        found.append(
            OomRow(
                id=row.id, split=row.split, device_key=row.device_key, laptop=row.laptop,
                box_gb=BOX_GB[row.device_key], total_gib=total, context_gib=context,
                outside_gib=outside, sms=cores // 128 if cores else None,
            )
        )  # fmt: skip
    return found


def line_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares y = a + b x."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def fit(rows: list[OomRow]) -> dict:
    calib = [r for r in rows if r.split == "calibration"]
    visible = [(r.box_gb, r.box_gb - r.total_gib) for r in calib if r.id not in WDDM]
    context = [(r.sms, r.context_gib) for r in calib if r.context_gib is not None and r.sms]
    a, b = line_fit(visible)
    c, d = line_fit(context)
    return {
        "reservation_fixed_gib": round(a, 4),
        "reservation_per_box_gb": round(b, 5),
        "context_fixed_gib": round(c, 4),
        "context_per_sm_gib": round(d, 6),
        "visible_rows": sorted(r.id for r in calib if r.id not in WDDM),
        "context_rows": sorted(r.id for r in calib if r.context_gib is not None and r.sms),
    }


def visible_gib(box_gb: float, constants: dict) -> float:
    """The rule's visible memory of a card of `box_gb`."""
    reservation = constants["reservation_fixed_gib"] + constants["reservation_per_box_gb"] * box_gb
    return box_gb - reservation


def _cell(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def table(rows: list[OomRow], constants: dict) -> list[str]:
    lines = [
        "| row | split | device | box GB | total GiB | predicted | error GiB | context GiB | "
        "predicted | error GiB | outside (bound) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r.split, r.device_key, r.id)):
        vis = visible_gib(r.box_gb, constants)
        ctx = (
            constants["context_fixed_gib"] + constants["context_per_sm_gib"] * r.sms
            if r.sms and r.context_gib is not None
            else None
        )
        miss = None if ctx is None else ctx - r.context_gib
        why = WDDM.get(r.id)
        lines.append(
            f"| {r.id} | {r.split} | {r.device_key}{' (laptop)' if r.laptop else ''} | {r.box_gb} "
            f"| {r.total_gib:.2f} | {vis:.2f} | "
            + (f"left out: {why}" if why else f"{vis - r.total_gib:+.2f}")
            + " | "
            + f"{_cell(r.context_gib, '.3f')} | {_cell(ctx, '.3f')} | {_cell(miss, '+.3f')} | "
            + f"{_cell(r.outside_gib, '.2f')} |"
        )
    return lines


def render(rows: list[OomRow], constants: dict) -> str:
    head = [
        "# Usable memory of consumer NVIDIA cards, from out-of-memory messages",
        "",
        "Generated by `python -m benchmarks.external.usable` from `corpus.yaml` (see the",
        "module's docstring for the method). Fitted on the calibration rows only; the held-out",
        "rows were collected with the corpus before this fit and were not fitted on (they are not",
        "blind: their values were in the corpus when the rule was chosen).",
        "",
        f"- visible memory = box GB - ({constants['reservation_fixed_gib']} + "
        f"{constants['reservation_per_box_gb']} x box GB) GiB, fitted on "
        f"{len(constants['visible_rows'])} rows: {', '.join(constants['visible_rows'])}",
        f"- CUDA context = {constants['context_fixed_gib']} + "
        f"{constants['context_per_sm_gib']} x SMs GiB, fitted on "
        f"{len(constants['context_rows'])} rows: {', '.join(constants['context_rows'])}",
        "- A negative error is a prediction under the real figure (the safe side for a verdict).",
        "- 'outside (bound)': total - reserved - free of the older messages, the context plus",
        "  other processes (the desktop's display): an upper bound on the context, not fitted.",
        "",
    ]
    return "\n".join(head + table(rows, constants)) + "\n"


def main(argv: list[str]) -> int:
    rows = oom_rows(load_corpus())
    constants = fit(rows)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "usable_memory.json").write_text(json.dumps(constants, indent=2) + "\n")
    (RESULTS / "usable_memory.md").write_text(render(rows, constants))
    print(json.dumps(constants, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
