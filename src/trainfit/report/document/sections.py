"""The sections of one plan (a stage, or the whole job) in a report: quick comparison,
memory breakdown and curve, recommended settings with the config files, training time, cost,
low-memory options, what to do on out-of-memory, multi-GPU and offload, the verify commands.

Fields of the plan's JSON (`trainfit.plan.words.plan_dict`) that this module does not render
in their own sections (the LoRA settings) are listed under "Other figures", so nothing the
plan holds is dropped. NB: figures are rounded as the plan's JSON rounds them, so the
Markdown shows the JSON's numbers.
"""

from __future__ import annotations

import json
import math

from trainfit.distributed.search import DistributedPlan
from trainfit.distributed.strategy import Offload
from trainfit.plan.cost_words import cost_notes_text
from trainfit.plan.options import DevicePlan, Setting
from trainfit.plan.time_words import basis_text, notes_by_device
from trainfit.plan.words import (
    changes_text,
    multi_gpu_text,
    note_text,
    plan_dict,
    rung_text,
    time_text,
)
from trainfit.report.document.claims import local_cost, multi_gpu_run
from trainfit.report.document.model import ModelSection, StageSection
from trainfit.report.document.plots import plot_names
from trainfit.report.document.text import Block, amount, gib, num
from trainfit.report.document.text import heading as _h
from trainfit.report.document.text import para as _p
from trainfit.report.document.text import table as _t
from trainfit.timing.run import CostLine

_RANK_PARTS = ("parameters", "gradients", "optimizer state", "activations", "other", "engine",
               "nccl", "context")  # fmt: skip
"""The columns of each rank's memory, in `_rank_parts`' order."""


def _setting_words(s: Setting) -> str:
    words = f"{s.precision.value}, {s.micro_batch} x {s.grad_accum}, {s.optimizer.value}"
    return words + (", checkpointing" if s.checkpointing else "")


def _cents(x: float | None) -> float | None:
    """A cost as the JSON rounds it."""
    return None if x is None else round(x, 2)


def stage_blocks(model: ModelSection, stage: StageSection, h: int, key: str) -> list[Block]:
    plan = stage.plan
    names = plot_names(stage, key)
    out = [
        _h(h, "Quick comparison"),
        _p(
            f"Effective batch {plan.effective_batch}; {plan.margin:.0%} of each "
            "device's memory kept free."
        ),
    ]
    rows = []
    for d, mem in zip(plan.devices, stage.memory, strict=True):
        s, local = d.setting, local_cost(d)
        step = None if d.run is None else d.run.step_seconds
        if not step:
            step = None if d.step_time is None else round(d.step_time.seconds, 6)
        cost = None if local is None else _cents(local.total)
        rows.append(
            (
                d.device,
                d.verdict.value,
                "-" if s is None else gib(s.needed_bytes),
                gib(mem.limit_bytes),
                "-" if s is None else _setting_words(s),
                "-" if step is None else f"{step * 1000:,.1f} ms",
                amount(None if d.run is None else d.run.hours),
                "-" if local is None or cost is None else f"{num(cost)} {local.currency}",
            )
        )
    out.append(
        _t(
            (
                "device",
                "verdict",
                "memory",
                "device memory",
                "setting",
                "step",
                "run hours",
                "local cost",
            ),
            rows,
        )
    )
    why = [
        (d.device, "; ".join([*changes_text(d), *([note_text(d)] if note_text(d) else [])]))
        for d in plan.devices
        if d.changes or note_text(d)
    ]
    if why:
        out.append(_t(("device", "changes / why"), why))
    out += _breakdown(stage, h, names)
    out += _settings(stage, h)
    out += _times(stage, h, names)
    out += _costs(stage, h)
    out += _ladder(stage, h)
    out += _oom(stage, h)
    out += _multi_gpu(stage, h)
    out += _verify(stage, h)
    out += _other(stage, h)
    return out


def _breakdown(stage: StageSection, h: int, names: dict[str, str]) -> list[Block]:
    out = [_h(h, "Memory breakdown")]
    shown = [m for m in stage.memory if m.breakdown]
    if shown:
        components = [c for c, _ in shown[0].breakdown]
        rows = [(c, *(gib(dict(m.breakdown)[c]) for m in shown)) for c in components]
        rows.append(("total", *(gib(sum(v for _, v in m.breakdown)) for m in shown)))
        rows.append(("usable (less the margin)", *(gib(m.usable_bytes) for m in shown)))
        rows.append(("device memory", *(gib(m.limit_bytes) for m in shown)))
        header = ("at the peak", *(f"{m.device} (micro-batch {m.micro_batch})" for m in shown))
        out.append(_t(header, rows))
    for m in stage.memory:
        if not m.breakdown:
            out.append(_p(f"{m.device}: {m.note}"))
    if "memory" in names:
        out.append(
            Block(kind="image", text="memory breakdown per device", links=(("", names["memory"]),))
        )
    if "curve" in names:
        out.append(
            _p("Memory against the micro-batch (the dashed lines: each device's usable memory):")
        )
        out.append(
            Block(kind="image", text="memory against micro-batch", links=(("", names["curve"]),))
        )
        rows = []
        for m in stage.memory:
            for p in m.curve:
                rows.append(
                    (m.device, str(p.micro_batch), gib(p.needed_bytes), "yes" if p.fits else "no")
                )
        out.append(_t(("device", "micro-batch", "memory", "fits the usable memory"), rows))
        out.append(
            _p(
                "A micro-batch whose memory is over the usable memory can still fit: at "
                "out-of-memory the allocator releases its cache and retries, and the step needs "
                "only what it allocates."
            )
        )
    return out


def _settings(stage: StageSection, h: int) -> list[Block]:
    out = [_h(h, "Recommended settings")]
    rows = []
    for d in stage.plan.devices:
        s = d.setting
        if s is None:
            continue
        tiers = {t.name: t for t in d.tiers}
        cells = []
        for name in ("conservative", "balanced", "aggressive"):
            t = tiers.get(name)
            cells.append(
                "-"
                if not t or not t.micro_batch
                else f"{t.micro_batch} x {t.grad_accum} ({gib(t.needed_bytes)})"
            )
        rows.append((d.device, _setting_words(s), *cells, str(d.max_micro_batch)))
    if rows:
        out.append(
            _t(
                (
                    "device",
                    "recommended",
                    "conservative (50%)",
                    "balanced (70%)",
                    "aggressive (85%)",
                    "maximum micro-batch",
                ),
                rows,
            )
        )
    else:
        out.append(_p("No device has a setting that fits."))
    if stage.configs:
        out.append(_p("Config files (seed-style YAML and the exports asked for):"))
        out.append(
            Block(
                kind="links",
                links=tuple(
                    (c.path.rsplit("/", 1)[-1] + f" ({c.device})", c.path) for c in stage.configs
                ),
            )
        )
    return out


def _times(stage: StageSection, h: int, names: dict[str, str]) -> list[Block]:
    out = [_h(h, "Training time")]
    rows, notes = [], []
    for d in stage.plan.devices:
        t, run = d.step_time, d.run
        if t is None:
            if time_text(d):
                notes.append(f"{d.device}: {time_text(d)}")
            continue
        tokens = None if t.tokens_per_second is None else round(t.tokens_per_second, 1)
        rows.append(
            (
                d.device,
                f"{round(t.seconds, 6) * 1000:,.1f} ms",
                num(round(t.samples_per_second, 3), ",.1f"),
                num(tokens, ",.0f"),
                "-" if run is None else f"{run.steps:,}",
                "-" if run is None else amount(run.hours),
                t.label.value,
            )
        )
    if rows:
        out.append(
            _t(
                ("device", "step (one GPU)", "samples/s", "tokens/s", "steps", "run hours", "how"),
                rows,
            )
        )
    by = []
    for d in stage.plan.devices:
        for n, t in sorted(dict(d.step_times).items()):
            by.append(
                (
                    d.device,
                    str(n),
                    str(t.micro_batch),
                    f"{round(t.seconds, 6) * 1000:,.1f} ms",
                    num(round(t.samples_per_second, 3), ",.1f"),
                )
            )
    if by:
        out += [
            _p(
                "Data parallel over several GPUs (each GPU's share of the effective batch; "
                "samples/s of all the GPUs together):"
            ),
            _t(("device", "GPUs", "micro-batch per GPU", "step", "samples/s (all GPUs)"), by),
        ]
    out += [_p(n) for n in notes]
    basis = sorted({basis_text(d.step_time.basis) for d in stage.plan.devices if d.step_time})
    out += [_p(f"Basis: {b}.") for b in basis]
    # NB: the table's steps are one GPU's
    out += [
        _p(f"{n}.") for n in notes_by_device((d.device, d.step_time) for d in stage.plan.devices)
    ]
    if "time" in names:
        out.append(
            Block(kind="image", text="run hours and cost per device", links=(("", names["time"]),))
        )
    return out


def _cost_row(device: str, c: CostLine) -> tuple[str, ...]:
    total = _cents(c.total)
    return (
        device, c.option, c.kind, amount(None if math.isnan(c.hours) else round(c.hours, 3)),
        num(_cents(c.on_demand)), num(_cents(c.spot)), num(_cents(c.electricity)),
        num(_cents(c.amortisation)), "-" if total is None else f"{num(total)} {c.currency}",
        cost_notes_text(c),
    )  # fmt: skip


def _costs(stage: StageSection, h: int) -> list[Block]:
    rows = [_cost_row(d.device, c) for d in stage.plan.devices for c in d.costs]
    if not rows:
        return []
    out = [
        _h(h, "Cost"),
        _t(
            (
                "device",
                "option",
                "kind",
                "hours",
                "on-demand",
                "spot",
                "electricity",
                "share of price",
                "total",
                "note",
            ),
            rows,
        ),
    ]
    if stage.plan.recommendation is not None:
        rec = plan_dict(stage.plan)["recommendation"]
        out.append(Block(kind="code", text=json.dumps(rec, indent=2, sort_keys=True)))
    return out


def _ladder(stage: StageSection, h: int) -> list[Block]:
    if not stage.plan.ladder:
        return []
    rows = [
        (
            rung_text(r),
            f"{r.micro_batch} x {r.grad_accum}",
            gib(r.needed_bytes),
            "" if not r.saved_bytes else gib(r.saved_bytes),
        )
        for r in stage.plan.ladder
    ]
    return [
        _h(h, "Low-memory options"),
        _p(f"Each change on top of the ones above it, on {stage.plan.ladder_device}:"),
        _t(("change", "micro x accum", "memory", "saves"), rows),
    ]


def _oom(stage: StageSection, h: int) -> list[Block]:
    items = []
    for d, m in zip(stage.plan.devices, stage.memory, strict=True):
        s = d.setting
        if s is None:
            continue
        micro, accum = s.micro_batch, s.grad_accum
        smaller = [p for p in m.curve if p.micro_batch < micro]
        if smaller:
            p = max(smaller, key=lambda p: p.micro_batch)
            effective = micro * accum
            steps = -(-effective // p.micro_batch)
            items.append(
                f"{d.device}: lower the micro-batch to {p.micro_batch} with accumulation "
                f"{steps} (the same effective batch): {gib(p.needed_bytes)} instead of "
                f"{gib(s.needed_bytes)}."
            )
    if stage.plan.ladder:
        items.append(
            "If that is not enough, take the next change of the low-memory options above that "
            "the setting does not use yet."
        )
    items.append(
        "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation, close other "
        "programs using the GPU, and check with `trainfit measure ... --max-batch` (below)."
    )
    return [_h(h, "If you run out of memory"), Block(kind="list", rows=tuple((i,) for i in items))]


def _multi_gpu(stage: StageSection, h: int) -> list[Block]:
    rows, parts, notes = _multi_gpu_rows(stage)
    if not rows and not notes:
        return []
    out = [
        _h(h, "Multi-GPU and offload"),
        _p(
            "Per GPU (rank), modelled from the one-GPU trace: each engine's share of the "
            "states, its buffers (DDP's gradient buckets, FSDP2's gathered units and "
            "reduce-scatter pool, DeepSpeed's buckets), NCCL's buffers and the runtime context. "
            "Communication overlapping compute is an assumption (docs/multi-gpu.md); DDP and "
            "FSDP2 were checked on 2 x H100 (benchmarks/sharded/results/)."
        ),
    ]
    if rows:
        out.append(
            _t(
                (
                    "device",
                    "engine",
                    "micro x accum per GPU",
                    "per GPU",
                    "step",
                    "communication",
                    "instance / host",
                    "USD per hour",
                    "run hours",
                    "run USD",
                ),
                rows,
            )
        )
    if parts:
        out.append(_p("Where each GPU's memory goes:"))
        out.append(_t(("device", "engine", *_RANK_PARTS), parts))
    if notes:
        out.append(Block(kind="list", rows=tuple((n,) for n in notes)))
    return out


def _multi_gpu_rows(
    stage: StageSection,
) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]], list[str]]:
    """Each device's multi-GPU plans (and the one with fewer GPUs offloading), each plan's
    per-rank memory, and why a device has none."""
    rows: list[tuple[str, ...]] = []
    parts: list[tuple[str, ...]] = []
    notes: list[str] = []
    for d in stage.plan.devices:
        many = d.distributed
        if many is not None:
            for one in (many, many.fewer_with_offload):
                if one is not None:
                    rows.append(_distributed_row(d.device, one, multi_gpu_run(stage.plan, one)))
                    parts.append(_rank_parts(d.device, one))
            continue
        if multi_gpu_text(d.no_multi_gpu):
            notes.append(f"{d.device}: {multi_gpu_text(d.no_multi_gpu)}")
        rows += _sharded_rows(d)
    return rows, parts, notes


def _sharded_rows(d: DevicePlan) -> list[tuple[str, ...]]:
    """A device that does not hold the job: its sharded and offloaded one-engine figures."""
    rows: list[tuple[str, ...]] = []
    sh, off = d.sharded, d.offloaded
    if sh is not None:
        rows.append(
            (
                d.device,
                f"{sh.gpus} GPUs sharded",
                "-",
                gib(sh.per_gpu_bytes),
                "-",
                "-",
                f"{sh.instance or '-'} x {sh.instances}",
                num(sh.usd_per_hour),
                "-",
                "-",
            )
        )
    if off is not None:
        rows.append(
            (
                d.device,
                "1 GPU, states offloaded to the CPU",
                "-",
                gib(off.gpu_bytes),
                "-",
                "-",
                f"host {gib(off.host_bytes)}",
                "-",
                "-",
                "-",
            )
        )
    return rows


def _distributed_how(plan: DistributedPlan) -> str:
    where = f"{plan.gpus} GPUs" + (f" over {plan.nodes} nodes" if plan.nodes != 1 else "")
    offload = "" if plan.offload is Offload.NONE else f", offload {plan.offload.value}"
    ckpt = ", checkpointing" if plan.checkpointing else ""
    return f"{plan.strategy.value} on {where} ({plan.precision.value}{ckpt}{offload})"


def _distributed_row(
    device: str, plan: DistributedPlan, run: tuple[float, float] | None
) -> tuple[str, ...]:
    memory, comm = plan.memory, plan.comm
    host = memory.host_bytes_per_node or 0
    step = None if plan.step_seconds is None else round(plan.step_seconds, 4)
    where = f"{plan.instance or '-'} x {plan.instances or '-'}"
    if host:
        where += f"; host {gib(host)} per node"
    return (
        device,
        _distributed_how(plan),
        f"{plan.micro_batch} x {plan.grad_accum}",
        gib(memory.total_bytes),
        "-" if step is None else f"{num(step)} s",
        "-"
        if comm is None
        else (
            f"{num(round(comm.seconds, 6))} s ({num(round(comm.exposed_seconds, 6))} s not hidden)"
        ),
        where,
        num(plan.usd_per_hour),
        "-" if run is None else num(run[0]),
        "-" if run is None or not plan.usd_per_hour else num(run[1]),
    )


def _rank_parts(device: str, plan: DistributedPlan) -> tuple[str, ...]:
    """The device, the engine and one rank's memory in `_RANK_PARTS`' order."""
    m = plan.memory
    parts = (
        m.parameters_bytes,
        m.gradients_bytes,
        m.optimizer_state_bytes,
        m.activations_bytes,
        m.other_bytes,
        m.engine_bytes,
        m.nccl_bytes,
        m.context_bytes,
    )
    return (device, _distributed_how(plan), *(gib(b) for b in parts))


def _verify(stage: StageSection, h: int) -> list[Block]:
    if not stage.verify:
        return []
    out = [_h(h, "Verify on the machine")]
    for v in stage.verify:
        out.append(_p(f"On {v.device}:"))
        out.append(
            Block(kind="code", text="\n".join(f"# {what}\n{cmd}" for what, cmd in v.commands))
        )
    return out


def _other(stage: StageSection, h: int) -> list[Block]:
    shown = {
        "model",
        "effective_batch",
        "margin",
        "devices",
        "ladder_device",
        "ladder",
        "run",
        "recommendation",
    }
    data = plan_dict(stage.plan)
    rows = [
        ("(plan)", k, json.dumps(data[k], sort_keys=True))
        for k in sorted(set(data) - shown)
        if data[k] is not None
    ]
    return [_h(h, "Other figures"), _t(("device", "field", "value"), rows)] if rows else []
