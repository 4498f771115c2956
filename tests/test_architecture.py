"""The package's shape, as docs/architecture.md states it: small files and functions, no
private name imported across packages, no internal lore in the source.

(The layers and the absence of import cycles are import-linter's contracts in pyproject.toml,
checked by `lint-imports` in CI.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "trainfit"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
ARGPARSE_TABLES = {"add_parser", "add_arguments", "_add_arguments"}
"""Functions that only declare command-line flags: exempt from the function length."""

# Internal lore: the seed notes and issue numbers this project was built from.
LORE = re.compile(r"\bseeds? 00\d\b|\bissue #\d+|(?<![\w/&])#\d{1,2}\b(?![\w-])", re.IGNORECASE)


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "templates" not in p.parts)


def _package(path: Path) -> str:
    """The first package below trainfit a module belongs to (a top-level module is its own)."""
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _module_package(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_file_is_over_the_limit(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_FILE_LINES, f"{path.relative_to(SRC)}: {lines} lines"


def test_no_test_or_benchmark_file_is_over_the_limit() -> None:
    """The line limit holds for the tests and the benchmarks too."""
    root = SRC.parents[1]
    long = [
        f"{path.relative_to(root)}: {lines} lines"
        for folder in ("tests", "benchmarks", "examples")
        for path in sorted((root / folder).rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    ]
    assert long == []


def test_no_function_is_over_the_limit() -> None:
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES and node.name not in ARGPARSE_TABLES:
                    long.append(f"{path.relative_to(SRC)}::{node.name} ({length} lines)")
    assert long == []


def test_no_private_name_is_imported_across_packages() -> None:
    crossing = []
    for path in _modules():
        here = _package(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
                "trainfit"
            ):
                continue
            there = _module_package(node.module)
            for alias in node.names:
                if alias.name.startswith("_") and there != here:
                    crossing.append(f"{path.relative_to(SRC)}: {node.module}.{alias.name}")
    assert crossing == []


def test_no_internal_lore_in_the_source() -> None:
    found = [
        f"{path.relative_to(SRC)}:{n}: {line.strip()}"
        for path in _modules()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if LORE.search(line)
    ]
    assert found == []


def test_the_lore_pattern_catches_what_it_is_for() -> None:
    assert LORE.search("seed 004's order")
    assert LORE.search("as issue #7 asked")
    assert LORE.search("(see #11)")
    assert not LORE.search("color #ffffff")
    assert not LORE.search("cuda:0 and rank #3-4")


def test_the_architecture_page_matches_the_tree() -> None:
    """docs/architecture.md is what docs/architecture.py makes of today's tree and layers."""
    import importlib.util

    root = SRC.parents[1]
    spec = importlib.util.spec_from_file_location("architecture", root / "docs" / "architecture.py")
    assert spec is not None and spec.loader is not None
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    written = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert written == page.render(), "rerun `python docs/architecture.py`"
