"""Sourced figures: every number in the hardware catalogs names where it was read and when.

A figure in a catalog file is either an object

    {"value": 989.4, "source": "glennklockwood-h100", "note": "dense, fp32 accumulate"}

whose `source` is a key of the file's `sources` table, or `{"value": null, "note": "why"}`
when no source was found (a null needs a note). In a user catalog file a bare value
(`"memory_bytes": 25769803776`) is also accepted: its source is the user file itself.

Parsing collects every problem of a file, each naming the row and the field, and raises one
CatalogError (see trainfit.errors).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

T = TypeVar("T")


class SourceKind(str, Enum):
    """How close a source is to the manufacturer or provider."""

    OFFICIAL = "official"
    """The vendor's or provider's own page, datasheet, whitepaper or press release."""
    SECONDARY = "secondary"
    """A third party restating or measuring the figure (spec database, review, blog)."""
    MEASURED = "measured"
    """Measured by this project; the URL is a path in this repository."""
    FITTED = "fitted"
    """Fitted by this project on published measurements; the URL is a path in this repository
    (the fit and the rows it rests on)."""
    USER = "user"
    """A user catalog file."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Source:
    """Where figures were read."""

    key: str
    url: str
    """https URL of the page read (or, for `measured`, a path in this repository)."""
    seen: dt.date
    """The date the page was read."""
    kind: SourceKind
    title: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Figure(Generic[T]):
    """One catalog figure and where it comes from; `value` is None when no source was found."""

    value: T | None
    source: Source | None
    note: str = ""

    @property
    def known(self) -> bool:
        return self.value is not None

    def cite(self) -> str:
        """`url (seen YYYY-MM-DD)`, or the note of an unsourced figure."""
        if self.source is None:
            return f"unsourced: {self.note}" if self.note else "unsourced"
        return f"{self.source.url} (seen {self.source.seen.isoformat()})"


UNKNOWN: Figure = Figure(value=None, source=None, note="not given")


class Problems:
    """Problems found in one catalog file, each naming its row and field."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{where}: {message}" if where else message)


def parse_sources(raw: object, problems: Problems, *, user: bool) -> dict[str, Source]:
    """The `sources` table of a catalog file."""
    out: dict[str, Source] = {}
    if raw is None:
        return out
    if not isinstance(raw, dict):
        problems.add("field 'sources'", f"expected an object, got {type(raw).__name__}")
        return out
    for key, row in raw.items():
        where = f"source {key!r}"
        if not isinstance(row, dict):
            problems.add(where, f"expected an object, got {type(row).__name__}")
            continue
        url, seen, kind = row.get("url"), row.get("seen"), row.get("kind", "user" if user else None)
        try:
            kind_value = SourceKind(kind)
        except ValueError:
            choices = ", ".join(k.value for k in SourceKind)
            problems.add(f"{where}, field 'kind'", f"expected one of {choices}, got {kind!r}")
            continue
        if not isinstance(url, str) or not url:
            problems.add(f"{where}, field 'url'", f"expected a URL, got {url!r}")
            continue
        local = kind_value in (SourceKind.MEASURED, SourceKind.FITTED)
        if not local and not url.startswith("https://"):
            problems.add(f"{where}, field 'url'", f"expected an https:// URL, got {url!r}")
            continue
        try:
            seen_date = dt.date.fromisoformat(seen) if isinstance(seen, str) else None
        except ValueError:
            seen_date = None
        if seen_date is None:
            problems.add(f"{where}, field 'seen'", f"expected a date YYYY-MM-DD, got {seen!r}")
            continue
        out[key] = Source(
            key=key, url=url, seen=seen_date, kind=kind_value, title=str(row.get("title", ""))
        )
    return out


def parse_figure(
    raw: object,
    where: str,
    problems: Problems,
    sources: Mapping[str, Source],
    check: Callable[[object], str | None],
    default_source: Source | None,
) -> Figure:
    """One figure; `check(value)` returns a problem text or None."""
    if isinstance(raw, dict):
        value, key, note = raw.get("value"), raw.get("source"), raw.get("note", "")
        if not isinstance(note, str):
            problems.add(where, f"'note' must be text, got {note!r}")
            note = ""
        if value is None:
            if not note:
                problems.add(where, "a null value needs a 'note' saying why")
            return Figure(value=None, source=None, note=note)
        if key is None:
            source = default_source
            if source is None:
                problems.add(where, "a value needs a 'source' (a key of the 'sources' table)")
                return UNKNOWN
        elif key not in sources:
            problems.add(where, f"source {key!r} is not in the 'sources' table")
            return UNKNOWN
        else:
            source = sources[key]
    else:
        value, note, source = raw, "", default_source
        if source is None:
            problems.add(where, 'expected {"value": ..., "source": ...}, got a bare value')
            return UNKNOWN
        if value is None:
            return Figure(value=None, source=None, note="null in user file")
    problem = check(value)
    if problem:
        problems.add(where, problem)
        return UNKNOWN
    if isinstance(value, list):
        value = tuple(value)
    return Figure(value=value, source=source, note=note)


def number_in(low: float, high: float, unit: str) -> Callable[[object], str | None]:
    """A check: a number between low and high."""

    def check(value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"expected a number ({unit}), got {value!r}"
        if not low <= value <= high:
            return f"{value} {unit} is outside the sane range {low:g}..{high:g}"
        return None

    return check


def one_of(choices: tuple[str, ...]) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        if value not in choices:
            return f"expected one of {', '.join(choices)}, got {value!r}"
        return None

    return check


def list_of(choices: tuple[str, ...]) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        if not isinstance(value, list) or not all(v in choices for v in value):
            return f"expected a list drawn from {', '.join(choices)}, got {value!r}"
        return None

    return check
