"""Terminal rendering of a Plan: one row per device, the tiers, and the low-memory ladder."""

from __future__ import annotations

import math

from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainfit.hardware.catalog import get_device
from trainfit.hardware.units import GIB
from trainfit.models.live_names import model_label
from trainfit.plan.cost_words import recommendation_text
from trainfit.plan.options import DevicePlan, Plan, Verdict
from trainfit.plan.time_words import notes_by_device
from trainfit.plan.words import (
    changes_text,
    input_text,
    multi_gpu_text,
    note_text,
    rank_memory_label,
    rung_text,
    time_text,
)
from trainfit.report.model import lora_text
from trainfit.report.tables import FitTable
from trainfit.timing.run import RunSpec

_STYLE = {
    Verdict.COMFORTABLE: "green",
    Verdict.WITH_CHANGES: "yellow",
    Verdict.NO: "red",
    Verdict.NOT_ESTIMATED: "dim",
}


def plan_renderable(plan: Plan) -> Group:
    """The plan as rich tables."""
    parts: list[object] = [_head(plan), _devices(plan)]
    if plan.run is not None:
        parts += _run_parts(plan, plan.run)
    multi = [_multi_gpu_words(d) for d in plan.devices if d.distributed or d.no_multi_gpu]
    if multi:
        parts.append(Text("\n".join(multi) + "\n"))
    notes = [f"{d.device}: {time_text(d)}" for d in plan.devices if d.no_time]
    if notes:
        parts.append(Text("\n".join(notes) + "\n", style="yellow"))
    one_gpu = plan.run is None or plan.run.gpus == 1  # NB: else a data-parallel step
    trust = notes_by_device(((d.device, d.step_time) for d in plan.devices), one_gpu)
    if trust:
        parts.append(Text("\n".join(trust) + "\n", style="dim"))
    if any(d.tiers for d in plan.devices):
        parts.append(_tiers(plan))
    if plan.ladder:
        parts.append(_ladder(plan))
    return Group(*parts)


def _head(plan: Plan) -> Text:
    return Text(
        f"{model_label(plan.spec.model)}: effective batch {plan.effective_batch}"
        f"{' ' + plan.spec.sample_unit if plan.spec.preference is not None else ''}, "
        f"{plan.margin:.0%} of each device's memory kept free\n"
        + ("" if plan.spec.lora is None else f"{lora_text(plan.spec.lora)} in every setting\n"),
        style="bold",
    )


def _devices(plan: Plan) -> Table:
    """One row per device: verdict, setting, step, and the changes or why none fits."""
    devices = FitTable(title="per device")
    timed = plan.run is not None
    rate = f"{plan.spec.sample_unit}/s"
    numeric = ("memory", "max micro", "step", rate, "run hours", "cost")
    columns = ["device", "verdict", "precision", "micro x accum", "memory", "max micro", "step"]
    columns += ["run hours", "cost"] if timed else [rate]
    for column in columns:
        devices.add_column(column, justify="right" if column in numeric else "left")
    devices.add_column("changes / why")
    for d in plan.devices:
        s = d.setting
        t = d.step_time
        # NB: with a run, the step the run takes (on its GPU count, DDP included)
        step_s = d.run.step_seconds if d.run is not None else (t.seconds if t else None)
        cells = [f"{step_s * 1000:,.0f} ms" if step_s is not None else "-"]
        if timed:
            local = next((c for c in d.costs if c.kind == "local"), None)
            cells += [
                f"{d.run.hours:,.1f}" if d.run else "-",
                f"{local.total:,.2f} {local.currency}" if local and local.total else "-",
            ]
        else:
            cells.append(f"{t.samples_per_second:,.1f}" if t else "-")
        devices.add_row(
            d.device,
            Text(d.verdict.value, style=_STYLE[d.verdict]),
            s.precision.value if s else "-",
            f"{s.micro_batch} x {s.grad_accum}" if s else "-",
            f"{s.needed_bytes / GIB:.2f} GiB" if s else "-",
            str(d.max_micro_batch) if s else "-",
            *cells,
            "; ".join(changes_text(d)) if s else note_text(d),
        )
    return devices


def _run_parts(plan: Plan, run: RunSpec) -> list[object]:
    """The run's comparison of devices, its cloud instances and the recommendation."""
    parts: list[object] = []
    compare = FitTable(title="comparison for the run (local: electricity + share of the price)")
    for column in ("device", "hours", "cost", "energy", "power", "memory headroom"):
        compare.add_column(column, justify="left" if column == "device" else "right")
    for d in plan.devices:
        if d.run is None or d.setting is None:
            continue
        local = next((c for c in d.costs if c.kind == "local"), None)
        device = get_device(d.device)
        board = device.tdp_watts.value
        watts = (
            run.watts if run.watts is not None else (None if board is None else board * run.gpus)
        )
        compare.add_row(
            d.device,
            f"{d.run.hours:,.1f}",
            (
                f"{local.total:,.2f} {local.currency}"
                + ("" if local.amortisation is not None else " (power only: no price)")
            )
            if local and local.total is not None
            else "-",
            f"{local.energy_kwh:,.1f} kWh" if local and local.energy_kwh else "-",
            f"{watts:g} W" if watts else "-",
            f"{1 - d.setting.needed_bytes / device.memory_bytes:.0%}",
        )
    if compare.row_count:
        parts.append(compare)
        timed = [d for d in plan.devices if d.run is not None and d.setting is not None]
        if not run.data_rate:
            parts.append(Text(input_text(timed[0].run, None), style="dim"))
        else:
            for d in timed:
                parts.append(Text(f"{d.device}: {input_text(d.run, run.data_rate)}", style="dim"))
    cloud = FitTable(title="cloud instances for the run (on-demand / spot)")
    for column in ("instance", "hours", "on-demand", "spot"):
        cloud.add_column(column, justify="left" if column == "instance" else "right")
    for d in plan.devices:
        for c in d.costs:
            if c.kind == "cloud":
                cloud.add_row(
                    c.option,
                    "-" if math.isnan(c.hours) else f"{c.hours:,.2f}",
                    "-" if c.on_demand is None else f"{c.on_demand:,.2f} {c.currency}",
                    "-" if c.spot is None else f"{c.spot:,.2f} {c.currency}",
                )
    if cloud.row_count:
        parts.append(cloud)
    rec = plan.recommendation
    labels = sorted(
        {d.step_time.label for d in plan.devices if d.step_time is not None}
        | {d.run.label for d in plan.devices if d.run is not None}
    )
    words = (recommendation_text(rec) + "\n") if rec is not None else ""
    if labels:
        words += (
            "local cost = electricity at the power shown + the run's share of the "
            f"purchase price; times: {', '.join(labels)} (benchmarks/timing)\n"
        )
    if run.gpus > 1:
        words += (
            f"on {run.gpus} GPUs each GPU runs its share at the micro-batch shown or "
            "less; the memory column is one GPU's without DDP, whose buckets add about "
            "the gradients' size\n"
        )
    parts.append(Text(words))
    return parts


def _tiers(plan: Plan) -> Table:
    """Each device's tiers and its largest micro-batch."""
    tiers = FitTable(title="tiers (micro-batch x accumulation, memory)")
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
    return tiers


def _ladder(plan: Plan) -> Table:
    """The low-memory ladder: each change, its split, memory and saving."""
    ladder = FitTable(title=f"low-memory ladder on {plan.ladder_device}")
    for column in ("change", "micro x accum", "memory", "saves"):
        ladder.add_column(column, justify="left" if column == "change" else "right")
    for rung in plan.ladder:
        ladder.add_row(
            rung_text(rung),
            f"{rung.micro_batch} x {rung.grad_accum}",
            f"{rung.needed_bytes / GIB:.2f} GiB",
            f"{rung.saved_bytes / GIB:+.2f} GiB" if rung.saved_bytes else "",
        )
    return ladder


def _multi_gpu_words(d: DevicePlan) -> str:
    """One device's multi-GPU plan in a line (trainfit.distributed, modelled)."""
    m = d.distributed
    if m is None:
        return f"{d.device} over several GPUs: {multi_gpu_text(d.no_multi_gpu)}"
    offload = f" + offload {m.offload.value}" if m.offload.value != "none" else ""
    host = (
        f", host RAM {m.memory.host_bytes_per_node / GIB:.0f} GiB per node"
        if m.memory.host_bytes_per_node
        else ""
    )
    time = "" if m.step_seconds is None else f", {m.step_seconds:.2f} s per step"
    comm = (
        ""
        if m.comm is None or not m.comm.seconds
        else (f" (collectives {m.comm.seconds:.2f} s, {m.comm.exposed_seconds:.2f} s not hidden)")
    )
    where = (
        f"; {m.instances} x {m.instance}" + (f" ${m.usd_per_hour:.2f}/h" if m.usd_per_hour else "")
        if m.instance
        else ""
    )
    nodes = f" on {m.nodes} nodes" if m.nodes > 1 else ""
    fewer = m.fewer_with_offload
    alternative = (
        ""
        if fewer is None
        else f"; or {fewer.gpus} GPUs with the states in host RAM (fsdp2 + offload params, "
        f"{fewer.memory.total_bytes / GIB:.1f} GiB per GPU, "
        f"{fewer.memory.host_bytes_per_node / GIB:.0f} GiB of host RAM per node)"
    )
    return (
        f"{d.device} over {m.gpus} GPUs{nodes}: {m.strategy.value}{offload}, "
        f"{m.precision.value}"
        + (", checkpointing" if m.checkpointing else "")
        + f", micro-batch {m.micro_batch} x {m.grad_accum}, "
        f"{m.memory.total_bytes / GIB:.1f} GiB per GPU of {m.budget_bytes / GIB:.1f}{host}"
        f"{time}{comm}{where} ({rank_memory_label(m.memory)}){alternative}"
    )
