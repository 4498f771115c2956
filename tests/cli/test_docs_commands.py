"""Every `trainfit` command shown in docs/*.md parses: its subcommand and flags exist (the
command is parsed, not run; README.md's commands are run by tests/test_readme.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from trainfit.cli.main import DEFAULT_EXAMPLE, _parser

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"```(?:console|bash|sh|shell)\n(.*?)```", re.S)


def _commands() -> list[tuple[str, list[str]]]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        for block in BLOCK.finditer(path.read_text(encoding="utf-8")):
            text = block.group(1).replace("\\\n", " ")
            for line in text.splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("trainfit ") or line == "trainfit":
                    words = shlex.split(line, comments=True)
                    found.append((f"{path.name}: {line[:50]}", words[1:]))
    return found


COMMANDS = _commands()


def test_the_docs_show_commands() -> None:
    assert len(COMMANDS) >= 10


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_docs_command_parses(where: str, argv: list[str]) -> None:
    argv = argv or list(DEFAULT_EXAMPLE)
    parser = _parser(argv[0])
    try:
        parser.parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: argparse refused it (exit {exc.code})")
