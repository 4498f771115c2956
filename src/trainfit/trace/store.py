"""Traced steps kept on disk between runs, so that a step traced once is not traced again.

A trace is a function of what it was traced from: the spec, the target, trainfit's own code,
and the versions of Python, torch, transformers and peft. `trace_key()` writes all of that
down (None where the spec's model or loss is code of the user's, or a hub id, whose content
trainfit cannot vouch for); the stored file is the pickled `StepTrace`, named by the key's
SHA-256, and holds the full key, checked on reading. Reading gives a fresh copy each time.

Where: `$TRAINFIT_CACHE_DIR`, else `$XDG_CACHE_HOME/trainfit/traces`, else
`~/.cache/trainfit/traces`. Off: `TRAINFIT_NO_CACHE=1`. The folder is kept under
`MAX_BYTES` (the least recently used traces go first).

Known limitations: trainfit's code is identified by the bytes of its package's files, so a
change to any of them (a comment included) starts a new set of keys; the old files stay
until the size bound removes them. Packages other than torch, transformers and peft (and the
environment variables torch reads) are taken not to change a trace.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import platform
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import torch

from trainfit.errors import TrainfitError
from trainfit.io import write_bytes_atomically
from trainfit.models import catalog as _catalog
from trainfit.models.imports import is_import_path
from trainfit.spec import TrainSpec
from trainfit.trace.collector import collector_paused
from trainfit.trace.target import Target

T = TypeVar("T")

FORMAT = 1
"""The stored files' layout; a change of it starts a new set of keys."""
MAX_BYTES = 2 * 2**30
"""The folder's size bound."""
OFF = "TRAINFIT_NO_CACHE"
FOLDER = "TRAINFIT_CACHE_DIR"


@dataclass(frozen=True, slots=True)
class _Stored:
    key: str
    trace: Any
    """A `trainfit.trace.step.StepTrace`."""


def enabled() -> bool:
    """Whether traces are kept on disk (`TRAINFIT_NO_CACHE` unset, empty or "0")."""
    return os.environ.get(OFF, "") in ("", "0")


def folder() -> Path:
    """Where the traces are kept."""
    given = os.environ.get(FOLDER)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "trainfit" / "traces"


def trace_key(
    spec: TrainSpec,
    target: Target,
    iterations: int,
    reuse_passes: bool,
    copies: bool,
    copied_key: str | None,
) -> str | None:
    """Everything the trace of these arguments is a function of, as text; None when that
    cannot be written down (a model, loss or step function of the user's code, a hub id, or
    passes copied (`copies`) from a trace without a key, `copied_key`)."""
    model = _model_identity(spec)
    if model is None or spec.loss or spec.step_fn:
        return None
    copied = ""
    if copies:
        if copied_key is None:
            return None
        copied = hashlib.sha256(copied_key.encode()).hexdigest()
    return "\n".join(
        (
            f"format {FORMAT}",
            _versions(),
            f"trainfit {_code_digest()}",
            f"model {model}",
            f"spec {spec!r}",
            f"target {target!r}",
            f"iterations {iterations} reuse {reuse_passes} passes_from {copied}",
        )
    )


def remembered(what: str, spec: TrainSpec, work_out: Callable[[], T]) -> T:
    """`work_out()`, a fact of `spec`'s model built on the meta device (its parameter counts,
    its blocks), kept beside the traces under `what` and the spec: a plan whose traces are all
    kept then needs neither the model nor transformers' modelling code. Not kept where a trace
    would not be (see `trace_key`)."""
    key = trace_key(spec, Target.cuda(), 0, False, False, None) if enabled() else None
    if key is None:
        return work_out()
    key = f"{key}\nfact {what}"
    found = load(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    fact = work_out()
    save(key, fact)
    return fact


def load(key: str) -> Any:
    """What is stored under `key` (a trace, or a fact of `remembered`), or None (none stored,
    or a file that does not read back)."""
    path = _path(key)
    # NB: the cyclic collector paused while tens of thousands of events are made: in a process
    # that imported torch and transformers its collections made a read 10 times slower
    try:
        with collector_paused(), path.open("rb") as file:
            stored = pickle.load(file)
    except FileNotFoundError:
        return None
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError):
        # NB: a file cut short (a full disk) or left by another trainfit: traced again and
        # written over
        return None
    if not isinstance(stored, _Stored) or stored.key != key:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # NB: the size bound removes the least recently used first
    return stored.trace


def kept(key: str) -> bool:
    """Whether a trace of `key` is stored (it may still fail to read back)."""
    return _path(key).is_file()


def save(key: str, trace: Any) -> None:
    """Keep `trace` under `key`: written to a temporary file and renamed into place, so that
    a reader (another process) never sees half a file. A folder that cannot be written is
    left alone: the trace is simply not kept."""
    path = _path(key)
    data = pickle.dumps(_Stored(key, trace), protocol=pickle.HIGHEST_PROTOCOL)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_bytes_atomically(path, data, private=True)
        _bound(path.parent)
    except (OSError, TrainfitError):
        return


def _path(key: str) -> Path:
    return folder() / f"{hashlib.sha256(key.encode()).hexdigest()}.pickle"


def _bound(where: Path) -> None:
    """Remove the least recently used traces while the folder is over `MAX_BYTES`."""
    files = [(p.stat(), p) for p in where.glob("*.pickle")]
    total = sum(s.st_size for s, _ in files)
    for stat, path in sorted(files, key=lambda f: f[0].st_mtime):
        if total <= MAX_BYTES:
            break
        path.unlink(missing_ok=True)
        total -= stat.st_size


def _model_identity(spec: TrainSpec) -> str | None:
    """What the model of `spec` is built from, in the order `build_program` looks: a catalog
    row, or a local directory's config.json (AutoConfig reads only it); None otherwise."""
    row = _catalog.find(spec.model)
    if row is not None:
        return f"catalog {row!r}"
    if is_import_path(spec.model) or not os.path.isdir(spec.model):
        return None
    try:
        config = Path(spec.model, "config.json").read_bytes()
    except OSError:
        return None
    return f"directory {os.path.abspath(spec.model)} {hashlib.sha256(config).hexdigest()}"


@cache
def _versions() -> str:
    """Python's, torch's, transformers' and peft's versions (read without importing them)."""
    found = []
    for package in ("transformers", "peft"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} none")
    return f"python {platform.python_version()} torch {torch.__version__} {' '.join(found)}"


@cache
def _code_digest() -> str:
    """SHA-256 over the path and bytes of every file of the trainfit package."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(str(path.relative_to(root)).encode())
            digest.update(b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()
