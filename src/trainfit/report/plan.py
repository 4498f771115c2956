"""Terminal rendering of a Plan: one row per device, the tiers, and the low-memory ladder."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainfit.plan import Plan, Verdict

GIB = 2**30

_STYLE = {
    Verdict.COMFORTABLE: "green",
    Verdict.WITH_CHANGES: "yellow",
    Verdict.NO: "red",
    Verdict.NOT_ESTIMATED: "dim",
}


def plan_renderable(plan: Plan) -> Group:
    """The plan as rich tables."""
    head = Text(
        f"{plan.spec.model}: effective batch {plan.effective_batch}, "
        f"{plan.margin:.0%} of each device's memory kept free\n",
        style="bold",
    )
    devices = Table(title="per device")
    for column in ("device", "verdict", "precision", "micro x accum", "memory", "max micro"):
        devices.add_column(column, justify="right" if column in ("memory", "max micro") else "left")
    devices.add_column("changes / why")
    for d in plan.devices:
        s = d.setting
        devices.add_row(
            d.device,
            Text(d.verdict.value, style=_STYLE[d.verdict]),
            s.precision.value if s else "-",
            f"{s.micro_batch} x {s.grad_accum}" if s else "-",
            f"{s.needed_bytes / GIB:.2f} GiB" if s else "-",
            str(d.max_micro_batch) if s else "-",
            "; ".join(d.changes) if s else d.note,
        )
    parts: list[object] = [head, devices]
    if any(d.tiers for d in plan.devices):
        tiers = Table(title="tiers (micro-batch x accumulation, memory)")
        tiers.add_column("device")
        names = [t.name for d in plan.devices for t in d.tiers][:3]
        for name in names:
            tiers.add_column(name, justify="right")
        tiers.add_column("maximum", justify="right")
        for d in plan.devices:
            if not d.tiers:
                continue
            cells = [
                f"{t.micro_batch} x {t.grad_accum} ({t.needed_bytes / GIB:.1f} GiB)"
                if t.micro_batch
                else "-"
                for t in d.tiers
            ]
            tiers.add_row(d.device, *cells, str(d.max_micro_batch))
        parts.append(tiers)
    if plan.ladder:
        ladder = Table(title=f"low-memory ladder on {plan.ladder_device}")
        for column in ("change", "micro x accum", "memory", "saves"):
            ladder.add_column(column, justify="left" if column == "change" else "right")
        for rung in plan.ladder:
            ladder.add_row(
                rung.change,
                f"{rung.micro_batch} x {rung.grad_accum}",
                f"{rung.needed_bytes / GIB:.2f} GiB",
                f"{rung.saved_bytes / GIB:+.2f} GiB" if rung.saved_bytes else "",
            )
        parts.append(ladder)
    return Group(*parts)
