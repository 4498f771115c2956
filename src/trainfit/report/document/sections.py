"""The sections of one plan (a stage, or the whole job) in a report: quick comparison,
memory breakdown and curve, recommended settings with the config files, training time, cost,
low-memory options, what to do on out-of-memory, multi-GPU and offload, the verify commands.

Fields of the plan's JSON that this module does not know (added by other pieces: LoRA,
preference pairs, strategies) are listed per device under "Other figures", so nothing the
plan holds is dropped.
"""

from __future__ import annotations

import json

from trainfit.report.document.claims import multi_gpu_run
from trainfit.report.document.model import ModelSection, StageSection
from trainfit.report.document.plots import plot_names
from trainfit.report.document.text import Block, amount, gib, num
from trainfit.report.document.text import heading as _h
from trainfit.report.document.text import para as _p
from trainfit.report.document.text import table as _t

_KNOWN = {
    "device", "display", "verdict", "setting", "changes", "max_micro_batch", "tiers", "note",
    "sharded", "offloaded", "time_note", "time", "time_by_gpus", "run", "costs", "distributed",
    "distributed_note",
}  # fmt: skip
"""Per-device keys of `Plan.to_dict()` rendered in their own sections."""


def _devices(stage: StageSection) -> list[dict[str, object]]:
    return stage.plan["devices"]  # type: ignore[return-value]


def _local(d: dict[str, object]) -> dict[str, object] | None:
    return next((c for c in d.get("costs", []) if c["kind"] == "local"), None)  # type: ignore[union-attr,index]


def _setting_words(s: dict[str, object]) -> str:
    words = f"{s['precision']}, {s['micro_batch']} x {s['grad_accum']}, {s['optimizer']}"
    return words + (", checkpointing" if s["checkpointing"] else "")


def stage_blocks(model: ModelSection, stage: StageSection, h: int, key: str) -> list[Block]:
    plan = stage.plan
    names = plot_names(stage, key)
    out = [
        _h(h, "Quick comparison"),
        _p(
            f"Effective batch {plan['effective_batch']}; {float(plan['margin']):.0%} of each "  # type: ignore[arg-type]
            "device's memory kept free."
        ),
    ]
    rows = []
    for d, mem in zip(_devices(stage), stage.memory, strict=True):
        s = d.get("setting")
        run, time, local = d.get("run"), d.get("time"), _local(d)
        step = (run or {}).get("step_seconds") or (time or {}).get("step_seconds")  # type: ignore[union-attr]
        cost = None if local is None else local.get("total")
        rows.append(
            (
                str(d["device"]),
                str(d["verdict"]),
                gib(s["needed_bytes"]) if isinstance(s, dict) else "-",
                gib(mem.limit_bytes),
                _setting_words(s) if isinstance(s, dict) else "-",
                "-" if step is None else f"{float(step) * 1000:,.1f} ms",
                amount((run or {}).get("hours")),  # type: ignore[union-attr]
                "-" if cost is None else f"{num(cost)} {local['currency']}",  # type: ignore[index]
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
        (
            str(d["device"]),
            "; ".join([*d.get("changes", []), *([d["note"]] if d.get("note") else [])]),
        )  # type: ignore[misc]
        for d in _devices(stage)
        if d.get("changes") or d.get("note")
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
    for d in _devices(stage):
        s = d.get("setting")
        if not isinstance(s, dict):
            continue
        tiers = {t["name"]: t for t in d.get("tiers", [])}  # type: ignore[union-attr]
        cells = []
        for name in ("conservative", "balanced", "aggressive"):
            t = tiers.get(name)
            cells.append(
                "-"
                if not t or not t["micro_batch"]
                else f"{t['micro_batch']} x {t['grad_accum']} ({gib(t['needed_bytes'])})"
            )
        rows.append((str(d["device"]), _setting_words(s), *cells, str(d["max_micro_batch"])))
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
    for d in _devices(stage):
        t, run = d.get("time"), d.get("run")
        if not isinstance(t, dict):
            if d.get("time_note"):
                notes.append(f"{d['device']}: {d['time_note']}")
            continue
        tokens = t.get("tokens_per_second")
        rows.append(
            (
                str(d["device"]),
                f"{float(t['step_seconds']) * 1000:,.1f} ms",
                num(t.get("samples_per_second"), ",.1f"),
                num(tokens, ",.0f"),
                "-" if not isinstance(run, dict) else f"{run['steps']:,}",
                "-" if not isinstance(run, dict) else amount(run["hours"]),
                str(t.get("label", "")),
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
    for d in _devices(stage):
        for n, t in sorted(dict(d.get("time_by_gpus") or {}).items(), key=lambda kv: int(kv[0])):  # type: ignore[arg-type]
            by.append(
                (
                    str(d["device"]),
                    str(n),
                    str(t["micro_batch"]),
                    f"{float(t['step_seconds']) * 1000:,.1f} ms",
                    num(t.get("samples_per_second"), ",.1f"),
                )
            )
    if by:
        out += [
            _p("Data parallel over several GPUs (each GPU's share of the effective batch):"),
            _t(("device", "GPUs", "micro-batch per GPU", "step", "samples/s"), by),
        ]
    out += [_p(n) for n in notes]
    basis = sorted(
        {
            str(d["time"]["basis"])
            for d in _devices(stage)
            if isinstance(d.get("time"), dict) and d["time"].get("basis")
        }
    )  # type: ignore[index,union-attr]
    out += [_p(f"Basis: {b}.") for b in basis]
    if "time" in names:
        out.append(
            Block(kind="image", text="run hours and cost per device", links=(("", names["time"]),))
        )
    return out


def _costs(stage: StageSection, h: int) -> list[Block]:
    rows = []
    for d in _devices(stage):
        for c in d.get("costs", []):  # type: ignore[union-attr]
            cur = c.get("currency", "")
            rows.append(
                (
                    str(d["device"]), str(c["option"]), str(c["kind"]), amount(c.get("hours")),
                    num(c.get("on_demand")), num(c.get("spot")), num(c.get("electricity")),
                    num(c.get("amortisation")),
                    "-" if c.get("total") is None else f"{num(c['total'])} {cur}",
                    str(c.get("note", "")),
                )
            )  # fmt: skip
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
    rec = stage.plan.get("recommendation")
    if isinstance(rec, dict):
        out.append(Block(kind="code", text=json.dumps(rec, indent=2, sort_keys=True)))
    return out


def _ladder(stage: StageSection, h: int) -> list[Block]:
    ladder = stage.plan.get("ladder") or []
    if not ladder:
        return []
    rows = [
        (
            str(r["change"]),
            f"{r['micro_batch']} x {r['grad_accum']}",
            gib(r["needed_bytes"]),
            "" if not r["saved_bytes"] else gib(r["saved_bytes"]),
        )
        for r in ladder  # type: ignore[union-attr]
    ]
    return [
        _h(h, "Low-memory options"),
        _p(f"Each change on top of the ones above it, on {stage.plan['ladder_device']}:"),
        _t(("change", "micro x accum", "memory", "saves"), rows),
    ]


def _oom(stage: StageSection, h: int) -> list[Block]:
    items = []
    for d, m in zip(_devices(stage), stage.memory, strict=True):
        s = d.get("setting")
        if not isinstance(s, dict):
            continue
        micro, accum = int(s["micro_batch"]), int(s["grad_accum"])  # type: ignore[call-overload]
        smaller = [p for p in m.curve if p.micro_batch < micro]
        if smaller:
            p = max(smaller, key=lambda p: p.micro_batch)
            effective = micro * accum
            steps = -(-effective // p.micro_batch)
            items.append(
                f"{d['device']}: lower the micro-batch to {p.micro_batch} with accumulation "
                f"{steps} (the same effective batch): {gib(p.needed_bytes)} instead of "
                f"{gib(s['needed_bytes'])}."
            )
    ladder = stage.plan.get("ladder") or []
    if ladder:
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
        names = ("parameters", "gradients", "optimizer_state", "activations", "other", "engine",
                 "nccl", "context")  # fmt: skip
        out.append(
            _t(
                ("device", "engine", *(n.replace("_", " ") for n in names)),
                [(dev, how, *(gib(b.get(n, 0)) for n in names)) for dev, how, b in parts],
            )
        )
    if notes:
        out.append(Block(kind="list", rows=tuple((n,) for n in notes)))
    return out


def _multi_gpu_rows(
    stage: StageSection,
) -> tuple[list[tuple[str, ...]], list[tuple[str, str, dict[str, int]]], list[str]]:
    """Each device's multi-GPU plans (and the one with fewer GPUs offloading), each plan's
    per-rank memory, and why a device has none."""
    rows: list[tuple[str, ...]] = []
    parts: list[tuple[str, str, dict[str, int]]] = []
    notes: list[str] = []
    for d in _devices(stage):
        plan = d.get("distributed")
        if isinstance(plan, dict):
            rows.append(_distributed_row(str(d["device"]), plan, multi_gpu_run(stage.plan, d)))
            parts.append(_rank_parts(str(d["device"]), plan))
            off = plan.get("fewer_with_offload")
            if isinstance(off, dict):
                run = multi_gpu_run(stage.plan, {**d, "distributed": off})
                rows.append(_distributed_row(str(d["device"]), off, run))
                parts.append(_rank_parts(str(d["device"]), off))
            continue
        if d.get("distributed_note"):
            notes.append(f"{d['device']}: {d['distributed_note']}")
        rows += _sharded_rows(d)
    return rows, parts, notes


def _sharded_rows(d: dict[str, object]) -> list[tuple[str, ...]]:
    """A device that does not hold the job: its sharded and offloaded one-engine figures."""
    rows = []
    sh, off = d.get("sharded"), d.get("offloaded")
    if isinstance(sh, dict):
        rows.append(
            (
                str(d["device"]),
                f"{sh['gpus']} GPUs sharded",
                "-",
                gib(sh["per_gpu_bytes"]),
                "-",
                "-",
                f"{sh.get('instance') or '-'} x {sh.get('instances')}",
                num(sh.get("usd_per_hour")),
                "-",
                "-",
            )
        )
    if isinstance(off, dict):
        rows.append(
            (
                str(d["device"]),
                "1 GPU, states offloaded to the CPU",
                "-",
                gib(off["gpu_bytes"]),
                "-",
                "-",
                f"host {gib(off['host_bytes'])}",
                "-",
                "-",
                "-",
            )
        )
    return rows


def _distributed_how(plan: dict[str, object]) -> str:
    where = f"{plan['gpus']} GPUs" + (f" over {plan['nodes']} nodes" if plan["nodes"] != 1 else "")
    offload = "" if plan.get("offload") in (None, "none") else f", offload {plan['offload']}"
    ckpt = ", checkpointing" if plan.get("checkpointing") else ""
    return f"{plan['strategy']} on {where} ({plan['precision']}{ckpt}{offload})"


def _distributed_row(
    device: str, plan: dict[str, object], run: tuple[float, float] | None
) -> tuple[str, ...]:
    memory = plan["memory"]
    comm = plan.get("comm") or {}
    host = memory.get("host_bytes_per_node") or 0  # type: ignore[union-attr]
    step = plan.get("step_seconds")
    where = f"{plan.get('instance') or '-'} x {plan.get('instances') or '-'}"
    if host:
        where += f"; host {gib(host)} per node"
    return (
        device,
        _distributed_how(plan),
        f"{plan['micro_batch']} x {plan['grad_accum']}",
        gib(memory["per_rank_bytes"]),  # type: ignore[index]
        "-" if step is None else f"{num(step)} s",
        "-"
        if not comm
        else f"{num(comm.get('seconds'))} s ({num(comm.get('exposed_seconds'))} s not hidden)",
        where,
        num(plan.get("usd_per_hour")),
        "-" if run is None else num(run[0]),
        "-" if run is None or not plan.get("usd_per_hour") else num(run[1]),
    )


def _rank_parts(device: str, plan: dict[str, object]) -> tuple[str, str, dict[str, int]]:
    return device, _distributed_how(plan), plan["memory"]["breakdown"]  # type: ignore[index]


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
    rows = []
    for d in _devices(stage):
        for k in sorted(set(d) - _KNOWN):
            if d[k] is None:  # NB: a setting not used in this plan (no LoRA, no preference)
                continue
            rows.append((str(d["device"]), k, json.dumps(d[k], sort_keys=True)))
    top = {
        "model",
        "effective_batch",
        "margin",
        "devices",
        "ladder_device",
        "ladder",
        "run",
        "recommendation",
    }
    rows += [
        ("(plan)", k, json.dumps(stage.plan[k], sort_keys=True))
        for k in sorted(set(stage.plan) - top)
        if stage.plan[k] is not None
    ]
    return [_h(h, "Other figures"), _t(("device", "field", "value"), rows)] if rows else []
