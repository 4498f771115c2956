"""PNG plots of a report (matplotlib, Agg backend): per stage of each model, the memory
breakdown per device as stacked bars with each device's limit, memory against micro-batch
with the limits, and run hours (or step time) and local cost per device.

The files are the same for the same report: no software tag or date in the PNG, a fixed
size, DPI and font. `plot_names` says which plots a stage has, for the renderers' links.
"""

from __future__ import annotations

import io
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from trainfit.hardware.units import GIB
from trainfit.report.document.claims import local_cost
from trainfit.report.document.model import Report, StageSection, slug

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f")


def plot_names(stage: StageSection, key: str) -> dict[str, str]:
    """{kind: relative path} of the plots `stage` has: memory, curve, time."""
    base = f"plots/{slug(key)}"
    names = {}
    if any(m.breakdown for m in stage.memory):
        names["memory"] = f"{base}_memory.png"
    if any(m.curve for m in stage.memory):
        names["curve"] = f"{base}_curve.png"
    if _times(stage):
        names["time"] = f"{base}_time.png"
    return names


def _times(stage: StageSection) -> list[tuple[str, float, float | None, str]]:
    """(device, hours or step seconds, local cost, unit) of each timed device."""
    out: list[tuple[str, float, float | None, str]] = []
    for d in stage.plan.devices:
        local = local_cost(d)
        # NB: the cost and step time rounded as the plan's JSON rounds them
        cost = None if local is None or local.total is None else round(local.total, 2)
        if d.run is not None:
            out.append((d.device, float(d.run.hours), cost, "run hours"))
        elif d.step_time is not None:
            out.append((d.device, round(d.step_time.seconds, 6) * 1000, None, "step ms"))
    return out


def stages_with_keys(report: Report) -> list[tuple[StageSection, str]]:
    """Every stage of the report and its plot key (the model's name, and stage number)."""
    return [
        (stage, m.name + (f"_stage{n}" if len(m.stages) > 1 else ""))
        for m in report.models
        for n, stage in enumerate(m.stages, 1)
    ]


def render_plots(report: Report) -> dict[str, bytes]:
    """{relative path: PNG bytes} of every plot of the report."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    with matplotlib.rc_context(
        {"font.family": "DejaVu Sans", "font.size": 9, "svg.hashsalt": "trainfit"}
    ):
        for stage, key in stages_with_keys(report):
            for kind, path in plot_names(stage, key).items():
                fig = {"memory": _memory, "curve": _curve, "time": _time}[kind](plt, stage, key)
                buffer = io.BytesIO()
                fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
                plt.close(fig)
                out[path] = buffer.getvalue()
    return out


def write_plots(report: Report, directory: Path | str) -> list[Path]:
    """Write every plot under `directory` (plots/...), atomically; return the paths."""
    from trainfit.io import write_bytes_atomically

    written = []
    for relative, data in render_plots(report).items():
        path = Path(directory) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomically(path, data)
        written.append(path)
    return written


def _memory(plt: ModuleType, stage: StageSection, key: str) -> Figure:
    # NB: one panel per device, each on its own scale (an 8 GB and an 80 GB GPU side by side)
    shown = list(stage.memory)
    fig, axes = plt.subplots(1, len(shown), figsize=(2.4 + 1.9 * len(shown), 4.4), squeeze=False)
    components = next(m.breakdown for m in shown if m.breakdown)
    for ax, m in zip(axes[0], shown, strict=True):
        bottom = 0.0
        for i, (component, _) in enumerate(components):
            value = dict(m.breakdown).get(component, 0) / GIB
            colour = _COLOURS[i % len(_COLOURS)]
            ax.bar([0], [value], 0.6, bottom=bottom, label=component, color=colour)
            bottom += value
        top = (m.limit_bytes or 0) / GIB
        if top:
            ax.axhline(top, color="black", linewidth=2)
        if m.usable_bytes:
            ax.axhline(m.usable_bytes / GIB, color="black", linestyle="dashed")
        if not m.breakdown:
            ax.text(0, top / 2, "no setting\nfits", ha="center", va="center", fontsize=8)
        ax.set_ylim(0, max(top, bottom) * 1.08 or 1.0)
        ax.set_xlim(-0.6, 0.6)
        ax.set_xticks([0], [f"{m.device}\nmicro {m.micro_batch}" if m.micro_batch else m.device])
        ax.set_ylabel("GiB")
        ax.set_title(f"{top:.1f} GiB", fontsize=8)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"{key}: memory at the peak (solid: device memory, dashed: usable)", fontsize=9)
    fig.tight_layout()
    return fig


def _curve(plt: ModuleType, stage: StageSection, key: str) -> Figure:
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, m in enumerate(m for m in stage.memory if m.curve):
        colour = _COLOURS[i % len(_COLOURS)]
        ax.plot(
            [p.micro_batch for p in m.curve],
            [p.needed_bytes / GIB for p in m.curve],
            marker="o",
            markersize=3,
            color=colour,
            label=m.device,
        )
        if m.usable_bytes:
            ax.axhline(m.usable_bytes / GIB, color=colour, linestyle="dashed", linewidth=1)
        ax.axvline(m.micro_batch, color=colour, linestyle="dotted", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("micro-batch")
    ax.set_ylabel("device memory needed (GiB)")
    ax.set_title(
        f"{key}: memory against micro-batch\n(dashed: usable memory, dotted: chosen micro-batch)",
        fontsize=9,
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _time(plt: ModuleType, stage: StageSection, key: str) -> Figure:
    rows = _times(stage)
    costed = [(r[0], r[2]) for r in rows if r[2] is not None]
    size = (8.0 if costed else 4.8, 1.4 + 0.5 * len(rows))
    fig, axes = plt.subplots(1, 2 if costed else 1, figsize=size, squeeze=False)
    ax = axes[0][0]
    ax.barh([r[0] for r in rows], [r[1] for r in rows], color=_COLOURS[0])
    ax.set_xlabel(" / ".join(sorted({r[3] for r in rows})))
    ax.invert_yaxis()
    if costed:
        bx = axes[0][1]
        bx.barh([c[0] for c in costed], [c[1] for c in costed], color=_COLOURS[1])
        bx.set_xlabel("local cost of the run")
        bx.invert_yaxis()
    fig.suptitle(f"{key}: time and cost per device")
    fig.tight_layout()
    return fig
