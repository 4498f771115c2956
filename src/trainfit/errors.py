"""trainfit's one exception tree.

    TrainfitError                 every error trainfit raises on purpose
    ├── SpecError                 the request is malformed or contradicts itself
    │   └── SpecFileError         a plan spec file's problems, each with its file and line
    ├── UnknownNameError          a model, device, optimizer, precision ... name not known
    ├── CatalogError              a catalog file (device/instance data) is malformed
    ├── ModelLoadError            the model could not be built (import path, config, factory)
    ├── TraceError                the training step could not be traced without weights
    └── MeasureError              a real run on a device failed (no device, out of memory ...)

The CLI catches `TrainfitError`, prints its message on one line and exits with code 1. The
library never prints and never exits.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TrainfitError(Exception):
    """Base of every error trainfit raises for a user mistake or an unsupported case."""


class SpecError(TrainfitError):
    """A training spec is malformed or contradicts itself.

    Holds every problem found, so that the user fixes them all at once.
    """

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


class SpecFileError(SpecError):
    """A plan spec file (`trainfit plan spec.yaml`) is malformed.

    Each problem starts with the file and, where known, its line (`spec.yaml:12: ...`); the CLI
    prints them one a line under one header line (`text()`).
    """

    def __init__(self, path: str, problems: Iterable[str]) -> None:
        self.path = path
        super().__init__(problems)

    def text(self) -> str:
        """The problems for a terminal: one line, or a header and one line each."""
        if len(self.problems) == 1:
            return self.problems[0]
        count = len(self.problems)
        return "\n".join([f"{self.path}: {count} problems", *(f"  {p}" for p in self.problems)])


class UnknownNameError(TrainfitError):
    """A name (model, device, optimizer, precision ...) that trainfit does not know."""

    def __init__(self, what: str, name: str, choices: Iterable[str], hint: str = "") -> None:
        choices = sorted(set(choices))
        close = difflib.get_close_matches(name.lower(), choices, n=3, cutoff=0.5)
        message = f"unknown {what} {name!r}"
        if close:
            message += f"; did you mean {', '.join(repr(c) for c in close)}?"
        elif len(choices) <= 12:
            message += f"; choose one of {', '.join(choices)}"
        if hint:
            message += f" ({hint})"
        self.what = what
        self.name = name
        self.close_matches = tuple(close)
        super().__init__(message)


class CatalogError(TrainfitError):
    """A catalog file is malformed; names the file, and each problem its row and field.

    Holds every problem of the file, so that the user fixes them all at once.
    """

    def __init__(self, path: str, problems: Iterable[str]) -> None:
        self.path = path
        self.problems = tuple(problems)
        super().__init__(f"catalog file {path}: " + "; ".join(self.problems))


class ModelLoadError(TrainfitError):
    """The model could not be built from its source."""


class TraceError(TrainfitError):
    """The training step could not be traced on the meta device."""


class MeasureError(TrainfitError):
    """A real run on a device failed."""
