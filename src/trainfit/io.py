"""Files and directories written whole or not at all: a temporary file in the same folder,
renamed into place; temporary directories beside the output directories, moved into place when
the command succeeds and removed when it fails or is interrupted. And values made ready for the
JSON written there (`json_ready`)."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

from trainfit.errors import TrainfitError


def write_bytes_atomically(path: Path | str, data: bytes, *, private: bool = False) -> None:
    """Write `data` to `path` through a temporary file renamed into place; TrainfitError
    naming the path when it cannot be written (a crash or an interrupt leaves the old file or
    none, and no temporary file). `private`: readable by its owner only (else as the umask
    makes an output)."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        if not private:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes it private; an output is not
        os.replace(temporary, path)
    except BaseException as exc:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise TrainfitError(f"cannot write {path}: {exc}") from exc
        raise


def write_atomically(path: Path | str, text: str) -> None:
    """`write_bytes_atomically` for text, encoded as UTF-8."""
    write_bytes_atomically(path, text.encode("utf-8"))


class StagedDirectories:
    """Output directories written whole or not at all.

    `path(directory)` gives the temporary directory that stands for `directory` until
    `commit()`, named `.<name>.trainfit-<random>`: inside the directory where it exists, else
    in its nearest existing ancestor (so that a rename moves it). `commit()` renames each into
    place, or, where the directory already exists, moves its files in one by one (each a
    rename); `discard()` removes them. `final(path)` is where a path under a temporary
    directory ends up.
    """

    def __init__(self) -> None:
        self._temporary: dict[Path, Path] = {}
        self._given: dict[Path, Path] = {}

    def path(self, directory: Path | str) -> Path:
        """The temporary directory standing for `directory` (made on first use)."""
        target = Path(os.path.abspath(directory))
        if target not in self._temporary:
            if target.exists() and not target.is_dir():
                raise TrainfitError(f"cannot write to {directory}: it is a file, not a directory")
            # NB: inside a directory that exists (the current one, say), so that nothing
            # outside it is touched; else in the nearest ancestor that exists
            parent = target if target.is_dir() else _existing_ancestor(target.parent)
            try:
                made = tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.trainfit-")
            except OSError as exc:
                raise TrainfitError(f"cannot write to {directory}: {exc}") from exc
            self._temporary[target] = Path(made)
            self._given[target] = Path(directory)
        return self._temporary[target]

    def final(self, path: Path | str) -> Path:
        """Where `path` (under one of the temporary directories) is once committed; a path
        under none of them is returned as it is."""
        path = Path(path)
        for target, temporary in self._temporary.items():
            if path == temporary or temporary in path.parents:
                return self._given[target] / path.relative_to(temporary)
        return path

    def commit(self) -> None:
        """Move every temporary directory into place; TrainfitError naming one that cannot."""
        for target, temporary in list(self._temporary.items()):
            try:
                if target.is_dir():
                    _merge(temporary, target)
                    shutil.rmtree(temporary, ignore_errors=True)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(temporary, target)
                    os.chmod(target, 0o777 & ~_umask())  # NB: mkdtemp makes it private
            except OSError as exc:
                raise TrainfitError(f"cannot write to {target}: {exc}") from exc
            del self._temporary[target]

    def discard(self) -> None:
        """Remove every temporary directory and what was written in it."""
        for temporary in self._temporary.values():
            shutil.rmtree(temporary, ignore_errors=True)
        self._temporary.clear()


@contextlib.contextmanager
def staged_directories() -> Iterator[StagedDirectories]:
    """`StagedDirectories` committed when the block ends, discarded when it raises (Ctrl-C
    included, which then goes on)."""
    staged = StagedDirectories()
    try:
        yield staged
    except BaseException:
        staged.discard()
        raise
    try:
        staged.commit()
    finally:
        staged.discard()  # NB: what a failed commit left


@contextlib.contextmanager
def atomic_directory(directory: Path | str) -> Iterator[Path]:
    """A temporary directory that becomes `directory` when the block ends (its files moved in
    where it exists), and is removed when the block raises."""
    with staged_directories() as staged:
        yield staged.path(directory)


def check_writable_directory(directory: Path | str, what: str) -> None:
    """TrainfitError unless `directory` can be made and written, checked without making it
    (in its nearest existing ancestor): a failed run leaves nothing behind."""
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise TrainfitError(f"cannot write to the {what} {directory}: it is a file")
    ancestor = _existing_ancestor(target)
    try:
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as exc:
        raise TrainfitError(f"cannot write to the {what} {directory}: {exc}") from exc


def _existing_ancestor(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _merge(source: Path, target: Path) -> None:
    """Move what `source` holds into the existing directory `target`, file by file."""
    for entry in source.iterdir():
        destination = target / entry.name
        if entry.is_dir() and destination.is_dir():
            _merge(entry, destination)
        else:
            os.replace(entry, destination)
            if entry.is_dir():
                os.chmod(destination, 0o777 & ~_umask())


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def json_ready(value: Any) -> Any:
    """`value` with enums as their values, mappings and sequences made ready in turn (tuples as
    lists), and a float that is not finite as its text (JSON has no NaN or infinity)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
