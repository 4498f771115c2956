"""The built-in catalog of named architectures (data in catalog.json, one source per row)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from trainfit.errors import UnknownNameError


@dataclass(frozen=True, kw_only=True, slots=True)
class CatalogModel:
    """One catalog row."""

    name: str
    """Catalog name, lower case."""
    kind: str
    """"hf" (a transformers config) or "module" (a factory of trainfit's own zoo)."""
    source: str
    """Where the config's numbers come from (model card, config.json, paper, seed document)."""
    family: str
    """decoder, encoder, encoder-decoder, vision, speech, or a plain-module family."""
    task: str
    """Default training task of the family."""
    config: dict[str, Any]
    """transformers config keyword arguments (kind "hf")."""
    factory: str = ""
    """`pkg.module:fn` (kind "module")."""
    inputs: tuple[str, ...] = ()
    """Default input specs (kind "module")."""
    hub_id: str = ""
    """Hugging Face hub id the config was taken from."""
    torch_dtype: str = ""
    """The published config.json's `torch_dtype` (the dtype `from_pretrained` loads the
    checkpoint in); empty where it declares none (fp32)."""
    aliases: tuple[str, ...] = ()


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


@cache
def catalog() -> dict[str, CatalogModel]:
    """All catalog rows by name."""
    text = resources.files("trainfit.models").joinpath("catalog.json").read_text(encoding="utf-8")
    rows: dict[str, CatalogModel] = {}
    for name, row in json.loads(text).items():
        rows[name] = CatalogModel(
            name=name,
            kind=row["kind"],
            source=row["source"],
            family=row["family"],
            task=row["task"],
            config=row.get("config", {}),
            factory=row.get("factory", ""),
            inputs=tuple(row.get("inputs", ())),
            hub_id=row.get("hub_id", ""),
            torch_dtype=row.get("torch_dtype", ""),
            aliases=tuple(row.get("aliases", ())),
        )
    return rows


@cache
def _index() -> dict[str, str]:
    index: dict[str, str] = {}
    for name, row in catalog().items():
        for key in (name, row.hub_id, *row.aliases):
            if key:
                index[_normalise(key)] = name
    return index


def find(name: str) -> CatalogModel | None:
    """The catalog row for a name, hub id or alias; None when not in the catalog."""
    key = _index().get(_normalise(name))
    return catalog()[key] if key else None


def lookup(name: str) -> CatalogModel:
    """Like find() but raises UnknownNameError with close matches."""
    row = find(name)
    if row is None:
        raise UnknownNameError(
            "model",
            name,
            catalog(),
            hint="run `trainfit models` for the catalog, or give a model directory or "
            "pkg.module:factory",
        )
    return row
