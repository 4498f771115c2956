"""How `--help` reads: flags in named groups, each with its default, and examples at the end.

Every command's parser is made by `command_parser`, which creates its groups in the order
`--help` lists them; the tables of flags (`add_parser`, `add_arguments`) put each flag in its
group with `group(parser, TITLE)`. `Formatter` appends `(default: X)` to a flag's help when it
has a default worth saying and its help does not already say it.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence

MODEL = "model"
BATCH = "batch"
PRECISION = "precision and memory"
DEVICE = "device"
DEVICES = "devices and GPUs"
MEASUREMENT = "measurement"
TIME = "time and cost"
INFERENCE = "inference (--inference)"
OUTPUT = "output"


class Formatter(argparse.RawDescriptionHelpFormatter):
    """The description and examples as written; each flag's default said once."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text.lower()
            or default is None
            or isinstance(default, bool)
            or default == argparse.SUPPRESS
            or (isinstance(default, list | tuple) and not default)
            or action.nargs == 0
        ):
            return action.help
        return f"{text} (default: {default})" if text else f"(default: {default})"


def command_parser(
    sub: argparse._SubParsersAction,
    name: str,
    help_text: str,
    groups: Sequence[str],
    examples: Sequence[str],
    arguments: str = "MODEL [options]",
) -> argparse.ArgumentParser:
    """The subcommand `name` (its usage line: `trainfit NAME ARGUMENTS`), its groups created in
    `--help`'s order and its examples as the help's last lines."""
    parser = sub.add_parser(
        name,
        help=help_text,
        usage=f"trainfit {name} {arguments}",
        description=help_text[:1].upper() + help_text[1:] + ".",
        formatter_class=Formatter,
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples),
    )
    for title in groups:
        parser.add_argument_group(title)
    return parser


def group(parser: argparse.ArgumentParser, title: str) -> argparse._ArgumentGroup:
    """The group `title` of `parser` (created by `command_parser`), or a new one at the end."""
    for found in parser._action_groups:
        if found.title == title:
            return found
    return parser.add_argument_group(title)


def examples(parser: argparse.ArgumentParser) -> list[list[str]]:
    """The examples of a command's help as argument lists (after `trainfit`), for tests."""
    lines = (parser.epilog or "").splitlines()[1:]
    return [shlex.split(line, comments=True)[1:] for line in lines if line.strip()]
