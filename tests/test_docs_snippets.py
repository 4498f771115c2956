"""The Python examples in docs/*.md: each parses, each `from trainfit... import` names something
that exists, and each self-contained one (every name it reads is defined in it) runs as written,
in a scratch directory."""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import os
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _snippets() -> list[tuple[str, str]]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        for i, match in enumerate(BLOCK.finditer(path.read_text(encoding="utf-8"))):
            found.append((f"{path.name}#{i}", match.group(1)))
    return found


SNIPPETS = _snippets()


def _free_names(tree: ast.Module) -> set[str]:
    """Names the snippet reads that it neither assigns, imports nor gets from builtins."""
    bound: set[str] = set(dir(builtins))
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read - bound


def test_there_are_snippets() -> None:
    assert len(SNIPPETS) >= 10


@pytest.mark.parametrize(("where", "code"), SNIPPETS, ids=[w for w, _ in SNIPPETS])
def test_snippet_parses_and_its_trainfit_imports_exist(where: str, code: str) -> None:
    tree = ast.parse(code, filename=where)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trainfit"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{where}: {node.module} has no {alias.name}"


def _missing_modules(tree: ast.Module) -> set[str]:
    """Top-level modules the snippet imports that are not installed (the reader's own)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return {name for name in names if importlib.util.find_spec(name) is None}


NOT_RUN = {"spec-file.md#0": "it reads spec.yaml, a file the reader has written"}
RUNNABLE = [
    (w, c)
    for w, c in SNIPPETS
    if w not in NOT_RUN and not _free_names(ast.parse(c)) and not _missing_modules(ast.parse(c))
]


def test_most_snippets_are_self_contained() -> None:
    assert len(RUNNABLE) >= 8, [w for w, _ in RUNNABLE]


@pytest.mark.slow
@pytest.mark.parametrize(("where", "code"), RUNNABLE, ids=[w for w, _ in RUNNABLE])
def test_self_contained_snippet_runs(
    where: str, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("transformers")
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code, where, "exec"), {"__name__": "__docs__"})
    finally:
        os.chdir(cwd)
