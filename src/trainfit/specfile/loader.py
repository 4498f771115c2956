"""Loading a plan spec file: safe YAML nodes, typed sections, every problem with its line.

The file is composed into YAML nodes with PyYAML's SafeLoader (`yaml.compose`): nothing is
constructed from a tag, and a tag other than YAML's plain ones (`!!python/object`, a custom
`!tag`) is an error. The nodes are then read into the dataclasses of `trainfit.specfile.schema`
field by field, driven by their type hints; each problem (unknown field with the closest name,
wrong type, duplicate key, missing model, YAML syntax) is collected with its line, and one
`SpecFileError` lists them all.

Known limitations: only the structure and types are checked here; names (devices, precisions,
optimizers) are checked when the file is turned into `trainfit plan` options
(`trainfit.specfile.options.resolve_plan_file`), and a model itself only when it is planned.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from trainfit.errors import SpecFileError, check_argument
from trainfit.specfile.schema import Data, ModelEntry, PlanFile, Training

_PLAIN_TAGS = frozenset(
    "tag:yaml.org,2002:" + name
    for name in ("str", "int", "float", "bool", "null", "seq", "map", "timestamp")
)
_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"
_DECIMAL = re.compile(r"^[-+]?(\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?$")
"""A number YAML 1.1 reads as a string (`1e6`, `2.5E-4`)."""
_BAD = object()
"""A value that could not be read (its problem is recorded)."""

_FLAT_SECTIONS: dict[str, type] = {"training": Training, "data": Data}
"""Sections whose fields a model entry may also give directly (`effective_batch: 32`)."""


def load_plan_spec(path: str | Path) -> PlanFile:
    """Load and check a plan spec file; `SpecFileError` lists every problem with its line."""
    check_argument("load_plan_spec", "path", path, (str, os.PathLike), "the spec file's path")
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecFileError(source, [f"{source}: spec file not found"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecFileError(source, [f"{source}: cannot read the spec file: {exc}"]) from None
    return parse_plan_spec(text, source, Path(path).resolve().parent)


def parse_plan_spec(
    text: str, source: str = "spec.yaml", directory: Path | None = None
) -> PlanFile:
    """`load_plan_spec` of a file's text; `source` names it in the problems."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = "; ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecFileError(source, [f"{where}: YAML syntax error: {problem}"]) from None
    except yaml.YAMLError as exc:
        raise SpecFileError(source, [f"{source}: YAML error: {exc}"]) from None
    if root is None:
        raise SpecFileError(source, [f"{source}: the file is empty: add 'model:' and 'training:'"])
    if not isinstance(root, yaml.MappingNode):
        raise SpecFileError(
            source,
            [
                f"{source}:{root.start_mark.line + 1}: the file must be a mapping of fields "
                "(model:, training:, devices: ...), not a single value or a list"
            ],
        )
    reader = _Reader(source)
    if not {k.value for k, _ in root.value} & {"model", "models"}:
        reader.problem(None, "no model: add 'model:' or 'models:'")
    planfile = reader.read(root, PlanFile, "")
    if planfile is _BAD or reader.problems:
        raise StructureError(
            source, reader.sorted_problems(), _partial(root, source, directory), reader.paths
        )
    planfile.source = source
    planfile.directory = directory or Path(".").resolve()
    planfile.lines = reader.lines
    _normalise_models(planfile, reader)
    _check_claims(planfile, reader)
    if reader.problems:
        raise SpecFileError(source, reader.sorted_problems())
    return planfile


class StructureError(SpecFileError):
    """A spec file's structure and types are wrong; `partial` is the file read without the
    fields that are (None when too little is left), so that the values of the others can be
    checked in the same round; `paths` are the fields with a problem."""

    def __init__(
        self, path: str, problems: list[str], partial: PlanFile | None, paths: list[str]
    ) -> None:
        super().__init__(path, problems)
        self.partial = partial
        self.paths = tuple(paths)


def _partial(root: yaml.MappingNode, source: str, directory: Path | None) -> PlanFile | None:
    """The file read again, leaving out each field that has a problem."""
    reader = _Reader(source, lenient=True)
    planfile = reader.read(root, PlanFile, "")
    if planfile is _BAD:
        return None
    planfile.source = source
    planfile.directory = directory or Path(".").resolve()
    planfile.lines = reader.lines
    _normalise_models(planfile, reader)
    return planfile if planfile.entries() else None


def _normalise_models(planfile: PlanFile, reader: _Reader) -> None:
    """`model:` or `models:` into `models` (every item a ModelEntry) with unique names."""
    if planfile.model is not None and planfile.models is not None:
        reader.problem(reader.lines.get("models"), "give 'model' or 'models', not both")
    given = planfile.models if planfile.models is not None else [planfile.model]
    given = [m for m in given if m is not None]
    prefix = "models" if planfile.models is not None else "model"
    if not given:
        reader.problem(reader.lines.get(prefix), f"{prefix}: empty: name at least one model")
    entries: list[ModelEntry] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(given):
        path = f"{prefix}[{index}]" if prefix == "models" else prefix
        entry = item if isinstance(item, ModelEntry) else ModelEntry(model=item)
        if prefix == "model":  # NB: lines are kept under `models[0]` for every model
            reader.relocate(path, "models[0]")
        if not isinstance(item, ModelEntry) and f"models[{index}]" in reader.lines:
            reader.lines[f"models[{index}].model"] = reader.lines[f"models[{index}]"]
        label = entry.label
        if label in seen:
            reader.problem(
                reader.lines.get(f"models[{index}].name", reader.lines.get(f"models[{index}]")),
                f"models[{index}]: name {label!r} is also models[{seen[label]}]'s; "
                "give each model its own 'name'",
            )
        seen.setdefault(label, index)
        entries.append(entry)
    planfile.models = list(entries)
    planfile.model = None


def _check_claims(planfile: PlanFile, reader: _Reader) -> None:
    """Each claim names a model of the file (required with several) and a sane range."""
    names = [entry.label for entry in planfile.entries()]
    for index, claim in enumerate(planfile.claims or ()):
        path = f"claims[{index}]"
        line = reader.lines.get(path)
        if claim.model is not None and names and claim.model not in names:
            reader.problem(
                reader.lines.get(f"{path}.model", line),
                f"{path}.model: {claim.model!r} is not a model of this file "
                f"(models: {', '.join(names)})",
            )
        for other in claim.models or ():
            if other not in names:
                reader.problem(
                    reader.lines.get(f"{path}.models", line),
                    f"{path}.models: {other!r} is not a model of this file "
                    f"(models: {', '.join(names)})",
                )
        versus = claim.versus
        for other in (
            [*([versus.model] if versus.model else []), *(versus.models or ())] if versus else ()
        ):
            if names and other not in names:
                reader.problem(
                    reader.lines.get(f"{path}.versus", line),
                    f"{path}.versus: {other!r} is not a model of this file "
                    f"(models: {', '.join(names)})",
                )
        if claim.model is None and not claim.models and len(names) > 1:
            reader.problem(line, f"{path}: name its model (one of {', '.join(names)})")
        if isinstance(claim.value, list) and (
            len(claim.value) != 2 or claim.value[0] > claim.value[1]
        ):
            reader.problem(
                reader.lines.get(f"{path}.value", line),
                f"{path}.value: a range is [low, high], got {claim.value}",
            )


class _Reader:
    """Reads YAML nodes into typed values, recording problems and the line of each field."""

    def __init__(self, source: str, lenient: bool = False) -> None:
        self.source = source
        self.problems: list[tuple[int, str]] = []
        self.lines: dict[str, int] = {}
        self.lenient = lenient
        """Leave out a field that has a problem (a list with one bad item is such a field)
        rather than the whole section."""
        self.paths: list[str] = []
        """The fields (and list items) with a problem."""

    def problem(self, line: int | None, text: str, path: str = "") -> None:
        where = f"{self.source}:{line}" if line is not None else self.source
        self.problems.append((line or 0, f"{where}: {text}"))
        if path:
            self.paths.append(path)

    def sorted_problems(self) -> list[str]:
        return [text for _, text in sorted(self.problems, key=lambda p: p[0])]

    def relocate(self, old: str, new: str) -> None:
        for key in [k for k in self.lines if k == old or k.startswith((old + ".", old + "["))]:
            self.lines[new + key[len(old) :]] = self.lines.pop(key)

    def read(self, node: yaml.Node, kind: Any, path: str) -> Any:
        """`node` as a value of type `kind` (a type hint), or _BAD with its problem recorded."""
        value = self._read(node, kind, path)
        if value is _BAD:
            self.paths.append(path)
        return value

    def _read(self, node: yaml.Node, kind: Any, path: str) -> Any:
        line = node.start_mark.line + 1
        if path:
            self.lines.setdefault(path, line)
        if node.tag not in _PLAIN_TAGS:
            self.problem(
                line,
                f"{_named(path)}tag {_tag(node.tag)!r} is not allowed: a spec file holds plain "
                "values (strings, numbers, lists, mappings)",
            )
            return _BAD
        if isinstance(node, yaml.ScalarNode) and node.tag == _NULL:
            if _optional(kind):
                return None
            self.problem(line, f"{_named(path)}expected {_describe(kind)}, got null")
            return _BAD
        kind = _without_none(kind)
        members = typing.get_args(kind) if _is_union(kind) else (kind,)
        for member in members:
            if _accepts(member, node):
                return self._read_as(node, member, path, line)
        self.problem(line, f"{_named(path)}expected {_describe(kind)}, got {_shown(node)}")
        return _BAD

    def _read_as(self, node: yaml.Node, kind: Any, path: str, line: int) -> Any:
        origin = typing.get_origin(kind)
        if dataclasses.is_dataclass(kind):
            return self._dataclass(node, kind, path)
        if origin is list:
            (item,) = typing.get_args(kind)
            if isinstance(node, yaml.ScalarNode):  # NB: one item may be given without a list
                self.lines.setdefault(f"{path}[0]", line)
                value = self.read(node, item, path)
                return _BAD if value is _BAD else [value]
            values = [self.read(n, item, f"{path}[{i}]") for i, n in enumerate(node.value)]
            return _BAD if any(v is _BAD for v in values) else values
        if origin is dict:
            _, item = typing.get_args(kind)
            out: dict[str, Any] = {}
            for key_node, value_node in self._pairs(node, path):
                key = key_node.value
                out[key] = self.read(value_node, item, f"{path}.{key}")
            return _BAD if any(v is _BAD for v in out.values()) else out
        return self._scalar(node, kind, path, line)

    def _scalar(self, node: yaml.ScalarNode, kind: Any, path: str, line: int) -> Any:
        text = node.value
        if kind is str:
            return text  # NB: as written, so `currency: NO` stays "NO" (not YAML 1.1's false)
        if isinstance(kind, type) and issubclass(kind, Enum):
            for member in kind:
                if member.value == text:
                    return member
            choices = " | ".join(m.value for m in kind)
            self.problem(line, f"{_named(path)}expected one of {choices}, got {text!r}")
            return _BAD
        if kind is bool:
            if node.tag.endswith(":bool") and text.lower() in ("true", "false"):
                return text.lower() == "true"
            self.problem(line, f"{_named(path)}expected true or false, got {_shown(node)}")
            return _BAD
        number = _number(node)
        if kind is int:
            if number is not None and math.isfinite(number) and number == int(number):
                return int(number)
            self.problem(line, f"{_named(path)}expected a whole number, got {_shown(node)}")
            return _BAD
        if kind is float:
            if number is not None:
                return number
            self.problem(line, f"{_named(path)}expected a number, got {_shown(node)}")
            return _BAD
        raise TypeError(f"spec schema type {kind!r} has no reader")  # a bug, not the user's

    def _pairs(self, node: yaml.MappingNode, path: str) -> list[tuple[yaml.Node, yaml.Node]]:
        """The mapping's (key, value) pairs, without duplicate or non-string keys (recorded).

        YAML merge keys (`<<: *defaults`) are applied as `yaml.safe_load` applies them: a field
        given in the mapping wins over a merged one.
        """
        own = {id(key) for key, _ in node.value if key.tag != _MERGE}
        try:
            yaml.SafeLoader("").flatten_mapping(node)
        except yaml.constructor.ConstructorError as exc:
            mark = exc.problem_mark or node.start_mark
            self.problem(mark.line + 1, f"{_named(path)}{exc.problem}")
            node.value = [(k, v) for k, v in node.value if k.tag != _MERGE]
        given = {key.value for key, _ in node.value if id(key) in own}
        seen: dict[str, int] = {}
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _NULL:
                self.problem(line, f"{_named(path)}a field name must be a plain word")
                continue
            key = key_node.value
            if id(key_node) not in own:
                if key not in given:  # NB: the last merged pair wins, as in yaml.safe_load
                    out[key] = (key_node, value_node)
                continue
            if key in seen:
                self.problem(
                    line, f"duplicate field {key!r} in {_where(path)} (first at line {seen[key]})"
                )
                continue
            seen[key] = line
            out[key] = (key_node, value_node)
        return list(out.values())

    def _dataclass(self, node: yaml.MappingNode, kind: type, path: str) -> Any:
        fields = {
            f.name: f for f in dataclasses.fields(kind) if f.metadata.get("yaml", True) is True
        }
        hints = typing.get_type_hints(kind)
        pairs = self._pairs(node, path)
        flat: dict[str, list[tuple[yaml.Node, yaml.Node]]] = {}
        if kind is ModelEntry:
            pairs, flat = _split_flat(pairs)
        values: dict[str, Any] = {}
        bad = False
        for key_node, value_node in pairs:
            key = key_node.value
            if key not in fields:
                extra = [n for section in _FLAT_SECTIONS.values() for n in _names(section)]
                candidates = list(fields) + (extra if kind is ModelEntry else [])
                text = (
                    _model_field_at_the_top(key)
                    if kind is PlanFile and key in _names(ModelEntry)
                    else _unknown(key, path, candidates)
                )
                self.problem(key_node.start_mark.line + 1, text)
                bad = True
                continue
            child = f"{path}.{key}" if path else key
            self.lines.setdefault(child, key_node.start_mark.line + 1)
            if kind is ModelEntry and key in flat:
                # NB: a nested section and the same section's fields given flat are one section
                value_node = yaml.MappingNode(
                    "tag:yaml.org,2002:map",
                    list(value_node.value) + flat.pop(key)
                    if isinstance(value_node, yaml.MappingNode)
                    else value_node.value,
                    value_node.start_mark,
                    value_node.end_mark,
                )
            value = self.read(value_node, hints[key], child)
            if value is _BAD:
                bad = True
            else:
                values[key] = value
        for section, section_pairs in flat.items():
            start = section_pairs[0][0]
            synthetic = yaml.MappingNode(
                "tag:yaml.org,2002:map", section_pairs, start.start_mark, start.end_mark
            )
            value = self.read(synthetic, hints[section], f"{path}.{section}")
            if value is _BAD:
                bad = True
            else:
                values[section] = value
        given = {key_node.value for key_node, _ in pairs}
        missing = [
            name
            for name, f in fields.items()
            if f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
            and name not in given
        ]
        for name in missing:
            self.problem(node.start_mark.line + 1, f"{_where(path)}: missing field {name!r}")
        required = [
            name
            for name, f in fields.items()
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing or (bad and not self.lenient) or any(n not in values for n in required):
            return _BAD
        return kind(**values)


def _split_flat(
    pairs: list[tuple[yaml.Node, yaml.Node]],
) -> tuple[list[tuple[yaml.Node, yaml.Node]], dict[str, list[tuple[yaml.Node, yaml.Node]]]]:
    """A model entry's own pairs, and its `training:`/`data:` fields given directly."""
    own_names = set(_names(ModelEntry))
    own = []
    flat: dict[str, list[tuple[yaml.Node, yaml.Node]]] = {}
    for key_node, value_node in pairs:
        key = key_node.value
        section = next(
            (s for s, kind in _FLAT_SECTIONS.items() if key in _names(kind)),
            None,
        )
        if key in own_names or section is None:
            own.append((key_node, value_node))
        else:
            flat.setdefault(section, []).append((key_node, value_node))
    return own, flat


def _names(kind: type) -> list[str]:
    return [f.name for f in dataclasses.fields(kind) if f.metadata.get("yaml", True) is True]


def _unknown(key: str, path: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"fields: {', '.join(candidates)}"
    return f"unknown field {key!r} in {_where(path)} ({hint})"


def _model_field_at_the_top(key: str) -> str:
    """A model's own field (`inputs`, `seq`, `task` ...) given at the file's top level."""
    return (
        f"{key!r} is a field of a model, not of the file's top level: write "
        f"'model: {{model: ..., {key}: ...}}', or give it in an item of 'models:'"
    )


def _tag(tag: str) -> str:
    """A tag as written: `!!python/object`, not `tag:yaml.org,2002:python/object`."""
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org") else tag


def _where(path: str) -> str:
    return path or "the file's top level"


def _named(path: str) -> str:
    return f"{path}: " if path else ""


def _is_union(kind: Any) -> bool:
    return typing.get_origin(kind) in (typing.Union, types.UnionType)


def _optional(kind: Any) -> bool:
    return _is_union(kind) and type(None) in typing.get_args(kind)


def _without_none(kind: Any) -> Any:
    if not _optional(kind):
        return kind
    rest = tuple(a for a in typing.get_args(kind) if a is not type(None))
    return rest[0] if len(rest) == 1 else typing.Union[rest]  # noqa: UP007


def _accepts(kind: Any, node: yaml.Node) -> bool:
    """Whether `node`'s kind (mapping, sequence, scalar) can be a `kind`."""
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind) or origin is dict:
        return isinstance(node, yaml.MappingNode)
    if origin is list:
        (item,) = typing.get_args(kind)
        return isinstance(node, yaml.SequenceNode) or (
            isinstance(node, yaml.ScalarNode) and _accepts(item, node)
        )
    return isinstance(node, yaml.ScalarNode)


def _number(node: yaml.ScalarNode) -> float | None:
    """The scalar as a number: YAML ints and floats, and `1e6` (a string to YAML 1.1)."""
    if node.tag.endswith((":bool", ":timestamp")) or node.style is not None:
        return None  # NB: a quoted "5" is a string the user wrote as one
    constructor = yaml.SafeLoader("")
    if node.tag.endswith(":int"):
        return float(constructor.construct_yaml_int(node))
    if node.tag.endswith(":float"):
        return float(constructor.construct_yaml_float(node))
    if _DECIMAL.match(node.value):
        return float(node.value.replace("_", ""))
    return None


def _describe(kind: Any) -> str:
    if _is_union(kind):
        return " or ".join(_describe(a) for a in typing.get_args(kind) if a is not type(None))
    origin = typing.get_origin(kind)
    if origin is list:
        return f"a list of {_describe(typing.get_args(kind)[0]).removeprefix('a ')}s"
    if origin is dict or dataclasses.is_dataclass(kind):
        return "a mapping"
    return {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}.get(
        kind, "a string"
    )


def _shown(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if _number(node) is not None or node.tag.endswith(":bool"):
        return node.value
    return repr(node.value)
