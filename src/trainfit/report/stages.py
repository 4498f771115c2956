"""Render a staged plan: each stage's plan, then the schedule per device."""

from __future__ import annotations

from rich.console import Group
from rich.rule import Rule
from rich.text import Text

from trainfit.hardware.units import GIB
from trainfit.plan.stages import StagedPlan
from trainfit.plan.words import failing_text
from trainfit.report.plan import plan_renderable
from trainfit.report.tables import FitTable


def staged_renderable(staged: StagedPlan) -> Group:
    """Each stage's plan under a rule naming it, then the whole schedule per device, with a
    line per stage that does not fit a device (its verdict and why)."""
    parts: list[object] = []
    for stage in staged.stages:
        frozen = f", frozen: {', '.join(stage.freeze)}" if stage.freeze else ""
        parts.append(Rule(f"{stage.name}: {stage.epochs:g} epochs{frozen}"))
        parts.append(plan_renderable(stage.plan))
    table = FitTable(title="the whole schedule", title_justify="left")
    for column, justify in (
        ("device", "left"),
        ("every stage fits", "left"),
        ("stages that do not fit", "left"),
        ("peak needed", "right"),
        ("hours", "right"),
        ("cheapest", "right"),
    ):
        table.add_column(column, justify=justify)
    run = staged.stages[0].plan.run
    currency = run.currency if run is not None else "USD"
    for device in staged.devices:
        cheapest = min(device.costs, key=lambda c: c[1], default=None)
        table.add_row(
            device.device,
            "yes" if device.fits else "no",
            ", ".join(name for name, _ in device.failing_stages) or "-",
            "-"
            if device.peak_needed_bytes is None
            else f"{device.peak_needed_bytes / GIB:.2f} GiB",
            "-" if device.hours is None else f"{device.hours:.1f}",
            "-" if cheapest is None else f"{cheapest[1]:.2f} {currency} ({cheapest[0]})",
        )
    parts += [Rule("schedule"), table]
    parts += [
        Text(f"{device.device}, {name}: {failing_text(plan)}")
        for device in staged.devices
        for name, plan in device.failing_stages
    ]
    return Group(*parts)
