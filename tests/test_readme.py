"""Every command in README.md runs, as written, after the README's install.

Each `bash` code block of the README is one test: its commands run in order (a block may
write a file that the next command reads), each in a shell, from a scratch directory that holds
links to the repository's top-level entries (so relative paths resolve and nothing is written
into the checkout), with `trainfit` on PATH resolving to this checkout's entry point
(`python -m trainfit` with only `src/` on PYTHONPATH: a command that needs the repository on
its path fails here as it would for a user).

Not run, each with its reason:
- a command whose line ends in `# needs a GPU`;
- `pip install` lines (the install itself: CI runs it, `.ci/run`);
- a command needing an optional package that is not installed (peft for `--lora`/`--qlora`,
  accelerate for `--export hf`, lightning for `--export lightning`, transformers for catalog and
  Hugging Face models), skipped with the package named.

The block after "prints the built-in example" is `trainfit`'s real output, pasted: it must be
what `trainfit` prints now (all but the timing line; at 100 columns).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GPU_MARK = "# needs a GPU"

REQUIRES: tuple[tuple[str, str], ...] = (
    (r"--q?lora\b", "peft"),
    (r"--export[ =]hf\b", "accelerate"),
    (r"--export[ =]lightning\b", "lightning"),
)
"""A command matching the pattern needs the package (an optional extra)."""


@dataclass(frozen=True)
class Block:
    """One `bash` code block of the README: its commands, in order."""

    line: int
    commands: tuple[str, ...]

    @property
    def name(self) -> str:
        first = self.commands[0] if self.commands else "(empty)"
        return f"line {self.line}: {first[:60]}"


def blocks(text: str) -> list[Block]:
    """The `bash` blocks of `text`: comment-only lines dropped, continuation lines joined."""
    found = []
    for match in re.finditer(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        line = text.count("\n", 0, match.start()) + 1
        joined = match.group(1).replace("\\\n", " ")
        commands = [c.strip() for c in joined.splitlines()]
        commands = [c for c in commands if c and not c.startswith("#")]
        found.append(Block(line=line, commands=tuple(commands)))
    return found


def why_not_run(command: str) -> str | None:
    """Why the test does not run `command` (None: it runs)."""
    if command.rstrip().endswith(GPU_MARK):
        return "marked as needing a GPU"
    if command.startswith("pip "):
        return "the install itself (CI runs it: .ci/run)"
    needed = [package for pattern, package in REQUIRES if re.search(pattern, command)]
    if "trainfit.models.zoo" not in command and command.split()[:2] != ["trainfit", "check"]:
        needed.append("transformers")  # NB: catalog and Hugging Face models
    missing = [p for p in needed if importlib.util.find_spec(p) is None]
    if missing:
        return f'needs {", ".join(missing)} (pip install "trainfit[all]")'
    return None


def scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A working directory linking the repository's entries, and an environment whose
    `trainfit` is this checkout's."""
    work = tmp_path / "work"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv"):
            (work / entry.name).symlink_to(entry)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "trainfit"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m trainfit "$@"\n')
    launcher.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT / "src")
    env["COLUMNS"] = "100"
    return work, env


def run(command: str, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )


BLOCKS = blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_its_commands() -> None:
    commands = [c for b in BLOCKS for c in b.commands]
    assert any(c == "trainfit" for c in commands)
    assert sum(c.startswith("trainfit ") for c in commands) >= 5
    assert any(c.endswith(GPU_MARK) for c in commands)
    assert len(README.read_text(encoding="utf-8")) <= 8000


def test_blocks_join_continuations_and_drop_comments() -> None:
    text = "```bash\n# a comment\ntrainfit estimate gpt2 \\\n    --batch 2\n\ntrainfit\n```\n"
    (block,) = blocks(text)
    assert block.commands == ("trainfit estimate gpt2      --batch 2", "trainfit")
    assert block.line == 1


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("trainfit measure gpt2 --batch 8   # needs a GPU", "marked as needing a GPU"),
        ('pip install "trainfit[all]"', "the install itself (CI runs it: .ci/run)"),
        ("trainfit estimate trainfit.models.zoo:resnet50 --batch 2", None),
    ],
)
def test_which_commands_are_not_run(command: str, reason: str | None) -> None:
    assert why_not_run(command) == reason


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_readme_block_runs(block: Block, tmp_path: Path) -> None:
    work, env = scratch(tmp_path)
    skipped = []
    for command in block.commands:
        reason = why_not_run(command)
        if reason is not None:
            skipped.append(f"{command!r}: {reason}")
            continue
        done = run(command, work, env)
        assert done.returncode == 0, (
            f"README.md line {block.line}: `{command}` exited {done.returncode}\n"
            f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
        )
        if command == "trainfit":
            assert_pasted_output(done.stdout)
    if skipped and len(skipped) == len(block.commands):
        pytest.skip("; ".join(skipped))


def pasted_output() -> list[str]:
    """The README's `text` block after `trainfit`'s block: its output, pasted."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^```bash\ntrainfit\n```\n.*?^```text\n(.*?)^```", text, flags=re.S | re.M)
    assert match is not None, "README.md: no ```text block after the `trainfit` block"
    return match.group(1).splitlines()


def comparable(lines: list[str]) -> list[str]:
    """Lines without trailing spaces and without the timing line, which varies per run."""
    return [line.rstrip() for line in lines if not line.startswith("estimated in ")]


def assert_pasted_output(stdout: str) -> None:
    real = comparable(stdout.splitlines())
    pasted = comparable(pasted_output())
    assert real == pasted, (
        "README.md's pasted output of `trainfit` is not what it prints now; paste this "
        "(COLUMNS=100 trainfit):\n" + stdout
    )
