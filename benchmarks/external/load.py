"""Load and check corpus.yaml: `load_corpus(path) -> list[CorpusRow]`.

Run `python -m benchmarks.external.load [corpus.yaml]` to print the counts per device, family and
split. Every problem raises ValueError naming the row id and the field.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CORPUS = Path(__file__).with_name("corpus.yaml")

FAMILIES = frozenset(
    {
        "consumer-ampere",
        "consumer-ada",
        "consumer-blackwell",
        "consumer-older",
        "datacenter",
        "apple-silicon",
    }
)
TIME_METRICS = frozenset(
    {"train_throughput_samples_per_s", "train_step_time_s", "train_epoch_time_s"}
)
MEMORY_METRICS = frozenset({"peak_memory_gib", "oom"})
SPLITS = frozenset({"calibration", "heldout"})
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TEXT = ("id", "source", "source_group", "device", "device_key", "model")
_KNOWN = frozenset(
    {
        "id", "split", "family", "kind", "source", "url", "commit", "source_date", "source_group",
        "device", "device_key", "catalog", "laptop", "software", "model", "trainfit_model",
        "batch", "seq_len", "image_size", "precision", "optimizer", "attn_implementation",
        "metric", "value", "unit", "reproducible", "reason", "notes",
    }
)  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class CorpusRow:
    """One published measurement; metric-specific fields (OOM numbers, steps...) are in extra."""

    id: str
    split: str
    family: str
    kind: str
    source: str
    source_date: str
    source_group: str
    device: str
    device_key: str
    catalog: str
    model: str
    metric: str
    value: float | None
    unit: str | None
    reproducible: bool
    url: str | None = None
    commit: str | None = None
    laptop: bool = False
    software: str | None = None
    trainfit_model: Mapping[str, Any] | None = None
    batch: int | None = None
    seq_len: int | None = None
    image_size: int | None = None
    precision: str | None = None
    optimizer: str | None = None
    attn_implementation: str | None = None
    reason: str | None = None
    notes: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def _fail(row_id: str, name: str, why: str) -> ValueError:
    return ValueError(f"corpus row {row_id!r}: field {name!r} {why}")


def _check(raw: Mapping[str, Any]) -> CorpusRow:
    row_id = str(raw.get("id") or "<no id>")
    for name in _TEXT:
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise _fail(row_id, name, "must be a non-empty string")
    choices = {
        "split": SPLITS,
        "family": FAMILIES,
        "kind": {"time", "memory"},
        "catalog": {"present", "missing"},
        "metric": TIME_METRICS | MEMORY_METRICS,
    }
    for name, allowed in choices.items():
        if raw.get(name) not in allowed:
            raise _fail(row_id, name, f"must be one of {sorted(allowed)}, not {raw.get(name)!r}")
    expected_kind = "memory" if raw["metric"] in MEMORY_METRICS else "time"
    if raw["kind"] != expected_kind:
        raise _fail(row_id, "kind", f"must be {expected_kind!r} for metric {raw['metric']!r}")
    if not _DATE.match(str(raw.get("source_date", ""))):
        raise _fail(row_id, "source_date", "must be YYYY-MM-DD")
    if not raw.get("url") and not raw.get("commit"):
        raise _fail(row_id, "url", "or 'commit' must say where the number was read")
    value = raw.get("value")
    if value is None:
        if raw["metric"] != "oom":
            raise _fail(row_id, "value", "is required (only oom rows may leave it empty)")
    elif isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise _fail(row_id, "value", f"must be a positive number, not {value!r}")
    elif not raw.get("unit"):
        raise _fail(row_id, "unit", "is required when a value is given")
    if not isinstance(raw.get("reproducible"), bool):
        raise _fail(row_id, "reproducible", "must be true or false")
    if not raw["reproducible"] and not raw.get("reason"):
        raise _fail(row_id, "reason", "must say why a row is not reproducible")
    spec = raw.get("trainfit_model")
    if spec is not None and not (isinstance(spec, Mapping) and isinstance(spec.get("model"), str)):
        raise _fail(row_id, "trainfit_model", "must be null or a mapping with a 'model' string")
    for name in ("batch", "seq_len", "image_size"):
        number = raw.get(name)
        if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
            raise _fail(row_id, name, f"must be an integer or null, not {number!r}")
    known = {k: v for k, v in raw.items() if k in _KNOWN}
    extra = {k: v for k, v in raw.items() if k not in _KNOWN}
    known["source_date"] = str(known["source_date"])
    known.setdefault("value", None)
    known.setdefault("unit", None)
    return CorpusRow(**known, extra=extra)


def load_corpus(path: str | Path = CORPUS) -> list[CorpusRow]:
    """The rows of a corpus file, each checked; ValueError names the first bad row and field."""
    document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(document, Mapping) or not isinstance(document.get("rows"), list):
        raise ValueError(f"{path}: expected a mapping with a 'rows' list")
    if not document.get("split_rule"):
        raise ValueError(f"{path}: the split_rule must be stated before the rows")
    rows: list[CorpusRow] = []
    seen: set[str] = set()
    for raw in document["rows"]:
        if not isinstance(raw, Mapping):
            raise ValueError(f"{path}: every row must be a mapping, got {raw!r}")
        row = _check(raw)
        if row.id in seen:
            raise _fail(row.id, "id", "is duplicated")
        seen.add(row.id)
        rows.append(row)
    return rows


def summary(rows: list[CorpusRow]) -> str:
    """Counts per device, per family and split, and the totals the corpus promises."""
    lines = [f"{len(rows)} rows, {len({r.device_key for r in rows})} device keys"]
    lines.append("per family (kind: calibration / heldout):")
    for family in sorted({r.family for r in rows}):
        cells = []
        for kind in ("time", "memory"):
            cal = sum(
                r.family == family and r.kind == kind and r.split == "calibration" for r in rows
            )
            held = sum(r.family == family and r.kind == kind and r.split == "heldout" for r in rows)
            cells.append(f"{kind} {cal}/{held}")
        lines.append(f"  {family:20s} {', '.join(cells)}")
    counts = Counter((r.device_key, r.catalog) for r in rows)
    repro = Counter(r.device_key for r in rows if r.reproducible)
    lines.append("per device key (rows, reproducible, catalog):")
    for (key, catalog), n in sorted(counts.items()):
        lines.append(f"  {key:28s} {n:4d} {repro[key]:4d}  {catalog}")
    apple = sum(r.family == "apple-silicon" for r in rows)
    consumer = sum(
        r.family in ("consumer-ampere", "consumer-ada", "consumer-blackwell") for r in rows
    )
    oom = sum(r.metric == "oom" for r in rows)
    lines.append(f"apple-silicon {apple}, consumer RTX 30/40/50 {consumer}, oom {oom}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(load_corpus(sys.argv[1] if len(sys.argv) > 1 else CORPUS)))
