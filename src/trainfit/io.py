"""Files written whole or not at all: a temporary file in the same folder, renamed into place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from trainfit.errors import TrainfitError


def write_bytes_atomically(path: Path | str, data: bytes) -> None:
    """Write `data` to `path` through a temporary file renamed into place; TrainfitError
    naming the path when it cannot be written (a crash leaves the old file or none)."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes it private; an output is not
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise TrainfitError(f"cannot write {path}: {exc}") from exc


def write_atomically(path: Path | str, text: str) -> None:
    """`write_bytes_atomically` for text, encoded as UTF-8."""
    write_bytes_atomically(path, text.encode("utf-8"))
