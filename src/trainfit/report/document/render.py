"""The report as Markdown, JSON and one self-contained HTML file (inline CSS, plots as
base64 data URIs, every text escaped, no external address: it works offline; the details
under collapsible `<details>` sections), all drawn from the same blocks."""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from trainfit.report.document.blocks import blocks
from trainfit.report.document.model import Report
from trainfit.report.document.text import Block


def to_json(report: Report) -> str:
    """The report as JSON (sorted keys, two-space indent)."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: Report) -> str:
    """The report as Markdown; plots and config files are linked by relative path."""
    lines: list[str] = []
    for b in blocks(report):
        if b.kind == "heading":
            lines += ["#" * b.level + " " + b.text, ""]
        elif b.kind == "text":
            lines += [b.text, ""]
        elif b.kind == "table":
            lines.append("| " + " | ".join(_cell(h) for h in b.header) + " |")
            lines.append("|" + "|".join("---" for _ in b.header) + "|")
            lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in b.rows]
            lines.append("")
        elif b.kind == "list":
            lines += [f"- {row[0]}" for row in b.rows] + [""]
        elif b.kind == "code":
            lines += ["```", b.text, "```", ""]
        elif b.kind == "image":
            lines += [f"![{b.text}]({b.links[0][1]})", ""]
        elif b.kind == "links":
            lines += [f"- [{label}]({path})" for label, path in b.links] + [""]
        # NB: "open"/"close" (a collapsible section) are HTML only: the Markdown's headings
        # already divide it
    return "\n".join(lines).rstrip("\n") + "\n"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}tr:nth-child(even) td{background:#fafafa}
pre{background:#f6f8fa;padding:.8em;overflow-x:auto;font-size:.85em}
code{background:#f6f8fa;padding:0 .2em}img{max-width:100%;border:1px solid #eee}
.bad{color:#b00020;font-weight:bold}.good{color:#1b5e20}
details{margin:.4em 0;border-top:1px solid #ddd;padding-top:.3em}
summary{cursor:pointer;font-weight:bold;font-size:1.1em}
""".strip()


def _inline(text: str) -> str:
    """Escaped text with `code` spans."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _td(text: str) -> str:
    cls = (
        ' class="bad"'
        if text.startswith("DISAGREES")
        else (' class="good"' if text.startswith("agrees") else "")
    )
    return f"<td{cls}>{_inline(text)}</td>"


def _images(plots: Mapping[str, bytes] | Sequence[Path]) -> dict[str, bytes]:
    if isinstance(plots, Mapping):
        return dict(plots)
    return {f"plots/{Path(p).name}": Path(p).read_bytes() for p in plots}


def to_html(report: Report, plots: Mapping[str, bytes] | Sequence[Path] = ()) -> str:
    """One self-contained HTML file: the Markdown's sections, `plots` ({relative path: PNG
    bytes}, or the paths `write_plots` returned) embedded as data URIs; config files are
    linked by relative path."""
    images = _images(plots)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(report.title)}</title>",
        f"<style>{_CSS}</style></head><body>",
    ]
    for b in blocks(report):
        out.append(_html_block(b, images))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _html_block(b: Block, images: dict[str, bytes]) -> str:
    if b.kind == "open":
        return f"<details><summary>{_inline(b.text)}</summary>"
    if b.kind == "close":
        return "</details>"
    if b.kind == "heading":
        return f"<h{b.level}>{_inline(b.text)}</h{b.level}>"
    if b.kind == "text":
        return f"<p>{_inline(b.text)}</p>"
    if b.kind == "table":
        head = "".join(f"<th>{_inline(h)}</th>" for h in b.header)
        body = "".join("<tr>" + "".join(_td(c) for c in row) + "</tr>" for row in b.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if b.kind == "list":
        return "<ul>" + "".join(f"<li>{_inline(row[0])}</li>" for row in b.rows) + "</ul>"
    if b.kind == "code":
        return f"<pre><code>{html.escape(b.text)}</code></pre>"
    if b.kind == "image":
        data = images.get(b.links[0][1])
        if data is None:
            return f"<p><em>{html.escape(b.text)}: plot not drawn</em></p>"
        encoded = base64.b64encode(data).decode("ascii")
        return f'<p><img alt="{html.escape(b.text)}" src="data:image/png;base64,{encoded}"></p>'
    items = "".join(
        f'<li><a href="{html.escape(path)}">{html.escape(label)}</a></li>'
        for label, path in b.links
    )
    return f"<ul>{items}</ul>"
