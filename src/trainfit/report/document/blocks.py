"""The report as a list of blocks (headings, paragraphs, tables, code, images, links) that
the Markdown and HTML renderers both draw, so their sections are the same."""

from __future__ import annotations

import json

from trainfit.plan.words import failing_text
from trainfit.report.document.claims import TOLERANCE
from trainfit.report.document.model import ModelSection, Report
from trainfit.report.document.sections import stage_blocks
from trainfit.report.document.summary import (
    figures_text,
    setting_text,
    summary_blocks,
    verdict_text,
    versus_text,
)
from trainfit.report.document.text import Block, amount, gib, num
from trainfit.report.document.text import heading as _h
from trainfit.report.document.text import para as _p
from trainfit.report.document.text import table as _t


def blocks(report: Report) -> list[Block]:
    """The whole document."""
    out = [_h(1, report.title), *summary_blocks(report)]
    if report.description.strip():
        out += _details("About", [_p(report.description.strip())])
    out += _details("Models and run", _overview(report))
    for model in report.models:
        out += _details(f"Details: {model.name}", _model(model, len(report.models) > 1))
    if report.claims:
        out += _details("The document's figures against trainfit's", _claims(report))
    for name, value in sorted(report.extra.items()):
        out += [_h(2, name), Block(kind="code", text=json.dumps(value, indent=2, sort_keys=True))]
    return out


def _details(label: str, inner: list[Block]) -> list[Block]:
    """`inner` as a collapsible section (HTML `<details>`; the Markdown shows it as it is)."""
    return [Block(kind="open", text=label), *inner, Block(kind="close")]


def _overview(report: Report) -> list[Block]:
    rows = []
    for m in report.models:
        tokens = "" if m.tokens_per_sample is None else f", {m.tokens_per_sample:,} tokens/sample"
        rows.append(
            (
                m.name,
                f"`{m.model}`",
                f"{m.parameters / 1e6:,.2f}M ({m.trainable_parameters / 1e6:,.2f}M trainable)"
                + tokens,
            )
        )
    out = [_t(("model", "source", "parameters"), rows)]
    run = report.run
    if run:
        size = (
            f"{run['samples']:,} samples"
            if run.get("samples")
            else f"{run.get('tokens') or 0:,} tokens"
        )
        out.append(
            _p(
                f"Run: {size} per epoch, {run['epochs']:g} epochs, {run['gpus']} GPU(s) per "
                "device, "
                f"electricity {run['kwh_price']:g} {run['currency']}/kWh, local devices paid off "
                f"over {run['years']:g} years of {run['hours_per_year']:g} hours."
            )
        )
    return out


def _model(model: ModelSection, several: bool) -> list[Block]:
    level = 2
    out = [_h(level, model.name)] if several else []
    if several:
        out.append(_p(f"`{model.model}`, {model.parameters / 1e6:,.2f}M parameters"))
    else:
        level = 1
    if model.schedule:
        out += [_h(level + 1, "Schedule over the stages")]
        rows = []
        for d in model.schedule:
            failing = "; ".join(f"{name}: {failing_text(p)}" for name, p in d.failing_stages)
            rows.append(
                (
                    d.device,
                    "yes" if d.fits else "no",
                    gib(d.peak_needed_bytes),
                    amount(d.hours),
                    "; ".join(f"{o}: {num(v)}" for o, v in d.costs),
                    failing,
                )
            )
        out.append(_t(("device", "fits", "peak memory", "hours", "costs", "failing stages"), rows))
    for number, stage in enumerate(model.stages, 1):
        sub = level
        if stage.name or len(model.stages) > 1:
            sub = level + 1
            frozen = f", frozen {', '.join(stage.freeze)}" if stage.freeze else ""
            epochs = "" if stage.epochs is None else f"{stage.epochs:g} epochs"
            out += [_h(sub, stage.name or f"Stage {number}"), _p(f"{epochs}{frozen}".strip(", "))]
        key = model.name + (f"_stage{number}" if len(model.stages) > 1 else "")
        out += stage_blocks(model, stage, sub + 1, key)
    if model.inference:
        out += _inference(model, level + 1)
    return out


def _inference(model: ModelSection, h: int) -> list[Block]:
    rows = []
    for r in model.inference:
        fits = "-" if r.fits is None else ("yes" if r.fits else "no")
        memory = "-" if r.memory_gib is None else f"{r.memory_gib:.2f} GiB"
        rows.append(
            (r.device, r.kind, r.precision, str(r.batch), str(r.context or "-"),
             str(r.new_tokens or "-"), memory, fits, num(r.prefill_ms, ",.3g"),
             num(r.per_token_ms, ",.3g"), num(r.decode_tokens_per_second, ",.4g"),
             num(r.total_ms, ",.4g"), r.bound or "-", r.note)
        )  # fmt: skip
    out = [
        _h(h, "Inference"),
        _p(
            "generate: greedy generation with a KV cache (prefill = the prompt's forward, then "
            "one decode step per new token); forward: one no_grad forward of the batch "
            "(its latency in the prefill and total columns); refused: not estimated (why)."
        ),
        _t(
            (
                "device",
                "kind",
                "precision",
                "batch",
                "context",
                "new tokens",
                "memory",
                "fits",
                "prefill ms",
                "ms/token",
                "tokens/s",
                "total ms",
                "bound",
                "note",
            ),
            rows,
        ),
    ]
    labels = sorted({(k, v) for r in model.inference for k, v in r.labels})
    if labels:
        out.append(_t(("figure", "how it was obtained"), labels))
    return out


def _claims(report: Report) -> list[Block]:
    rows = []
    for c in report.claims:
        doc = f"{c.low:g}" if c.low == c.high else f"{c.low:g}-{c.high:g}"
        at = "" if c.setting is None else setting_text(c.setting, c.gpus)
        at = " ".join(x for x in (at or "the plan's", versus_text(c)) if x)
        quantity = c.quantity + (f" ({c.versus.compare})" if c.versus is not None else "")
        rows.append(
            (c.what, c.model, c.device or "-", quantity, at, doc,
             num(c.trainfit, ",.4g"), num(c.ratio, ".2f"), verdict_text(c), c.source,
             "; ".join(x for x in (c.why, c.note, figures_text(c)) if x))
        )  # fmt: skip
    return [
        _h(2, "The document's figures against trainfit's"),
        _p(
            "Ratio: trainfit over the document (1.00 inside a range); beyond "
            f"{TOLERANCE:.0%} disagrees. "
            "Setting: where the document gives its own, trainfit's figure is computed at it."
        ),
        _t(
            (
                "claim",
                "model",
                "device",
                "quantity",
                "setting",
                "document",
                "trainfit",
                "ratio",
                "verdict",
                "source",
                "details",
            ),
            rows,
        ),
    ]
