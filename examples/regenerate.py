"""Regenerate the committed example reports, or check that they are up to date.

    PYTHONPATH=src python examples/regenerate.py            # rewrite every seed's report/
    PYTHONPATH=src python examples/regenerate.py --check    # exit 1 naming each stale file
    PYTHONPATH=src python examples/regenerate.py --seed 002 # only the seeds whose folder starts so

Each ``examples/seeds/*/*.yaml`` (a seed's ``spec.yaml``, and more specs where one seed needs
several, each with its own ``outputs.report``) is planned with
``trainfit plan SPEC --report DIR`` through the CLI's ``main`` in this process (the tables it
prints are swallowed). The report is always
written to a fresh temporary folder first: ``--check`` compares that folder with the committed
``outputs.report`` folder: the report's data (Markdown, JSON, the exported configs) byte for byte,
the HTML with its embedded images left out, and a PNG plot only by its presence (matplotlib and
zlib versions change a PNG's bytes, not its data); without it the committed folder is replaced by
the new one as a whole, so files a report no longer has go too.

Known limitations:
    The data is compared byte for byte, so anything in it that depends on the machine (the
    host's RAM, a timestamp) makes it stale elsewhere; the specs name only catalog devices for
    that reason, never ``cpu``. A plot that changed while its data did not goes unnoticed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

SEEDS = Path(__file__).resolve().parent / "seeds"
"""The folder of the example specs, one sub-folder per seed document."""


@dataclass(kw_only=True, slots=True)
class SeedResult:
    """What regenerating or checking one spec found."""

    spec: Path
    """The spec file."""
    seconds: float
    """Wall time of the plan and its report."""
    error: str = ""
    """The CLI's error output when the plan failed, else empty."""
    stale: list[str] = field(default_factory=list)
    """With --check: each file that differs, is missing or is extra, with the reason."""


def specs(prefix: str = "") -> list[Path]:
    """Every example spec, in seed order; only those whose folder name starts with ``prefix``."""
    return sorted(p for p in SEEDS.glob("*/*.yaml") if p.parent.name.startswith(prefix))


def report_dir(spec: Path) -> Path:
    """The committed report folder of ``spec``: its ``outputs.report``, relative to the spec."""
    data = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
    outputs = data.get("outputs") or {}
    if not outputs.get("report"):
        raise ValueError(f"{spec}: outputs.report is not set; every example needs its report")
    return (spec.parent / outputs["report"]).resolve()


def features_available() -> str:
    """Empty when ``trainfit plan`` takes a spec file and ``--report``; else the reason not."""
    from trainfit.cli import main as cli_main

    parser = cli_main._parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            _, unknown = parser.parse_known_args(["plan", "spec.yaml", "--report", "out"])
    except SystemExit:
        return (
            "`trainfit plan spec.yaml --report DIR` is not accepted by this trainfit "
            f"(spec-file and report features not merged): {err.getvalue().strip().splitlines()[-1]}"
        )
    if unknown:
        return f"`trainfit plan` does not know {' '.join(unknown)} (report feature not merged)"
    return ""


def render(spec: Path, out: Path) -> tuple[float, str]:
    """Plan ``spec`` with its report written to ``out``; (seconds, error text or '')."""
    from trainfit.cli import main as cli_main

    stdout, stderr = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli_main.main(["plan", str(spec), "--report", str(out)])
    seconds = time.perf_counter() - start
    if code != 0:
        return seconds, stderr.getvalue().strip() or f"trainfit plan exited {code}"
    return seconds, ""


def _files(root: Path) -> dict[str, Path]:
    """Every file under ``root`` by its path relative to ``root`` (POSIX separators)."""
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


_EMBEDDED_IMAGE = re.compile(rb"data:image/png;base64,[A-Za-z0-9+/=]*")


def _data(path: Path) -> bytes | None:
    """What of a report file is compared: None for a PNG (only its presence counts), the HTML
    without its embedded images, any other file whole."""
    if path.suffix == ".png":
        return None
    data = path.read_bytes()
    if path.suffix == ".html":
        return _EMBEDDED_IMAGE.sub(b"data:image/png;base64,", data)
    return data


def differences(fresh: Path, committed: Path) -> list[str]:
    """Each file that differs between the two folders, with why, relative to ``committed``."""
    new, old = _files(fresh), _files(committed)
    out = []
    for name in sorted(new.keys() | old.keys()):
        where = f"{committed / name}"
        if name not in old:
            out.append(f"{where}: not committed (the report now has it)")
        elif name not in new:
            out.append(f"{where}: no longer generated")
        elif _data(new[name]) != _data(old[name]):
            out.append(f"{where}: stale")
    return out


def _replace_dir(fresh: Path, target: Path) -> None:
    """Put ``fresh`` in place of ``target``: the old folder is moved aside, then removed."""
    old = target.with_name(f".{target.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        os.replace(target, old)
    os.replace(fresh, target)
    if old.exists():
        shutil.rmtree(old)


def run_one(spec: Path, *, check: bool) -> SeedResult:
    """Regenerate (or, with ``check``, compare) the report of one spec."""
    target = report_dir(spec)
    # NB: when writing, a temporary folder beside the report, so the final rename stays on one
    # file system; a check writes only to the system's temporary folder
    with tempfile.TemporaryDirectory(dir=None if check else spec.parent, prefix=".report-") as tmp:
        fresh = Path(tmp) / "report"
        seconds, error = render(spec, fresh)
        result = SeedResult(spec=spec, seconds=seconds, error=error)
        if error:
            return result
        if check:
            result.stale = differences(fresh, target)
        else:
            _replace_dir(fresh, target)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate or check every example; 0 when all is well, 1 otherwise."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed reports; write nothing"
    )
    parser.add_argument("--seed", default="", help="only the seed folders starting with this")
    args = parser.parse_args(argv)
    missing = features_available()
    if missing:
        print(f"regenerate: {missing}", file=sys.stderr)
        return 1
    chosen = specs(args.seed)
    if not chosen:
        print(f"regenerate: no spec under {SEEDS} starts with {args.seed!r}", file=sys.stderr)
        return 1
    failed = False
    for spec in chosen:
        result = run_one(spec, check=args.check)
        name = f"{spec.parent.name}/{spec.name}"
        if result.error:
            failed = True
            print(f"{name}: FAILED in {result.seconds:.1f} s: {result.error}")
        elif result.stale:
            failed = True
            print(f"{name}: {len(result.stale)} stale file(s) ({result.seconds:.1f} s):")
            for line in result.stale:
                print(f"  {line}")
        else:
            verb = "up to date" if args.check else "regenerated"
            print(f"{name}: {verb} ({result.seconds:.1f} s)")
    if failed and args.check:
        print("regenerate with: PYTHONPATH=src python examples/regenerate.py")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
