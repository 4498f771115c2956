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
library never prints and never exits. An exception raised by the user's own code (a model's
forward, a loss, a step function) is turned into one of these where trainfit calls that code,
worded by `raised_in_user_code`: its type, its message and the user's frame.
"""

from __future__ import annotations

import difflib
import os
import sys
import sysconfig
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


def check_argument(
    function: str, name: str, value: object, kind: type | tuple[type, ...], hint: str
) -> None:
    """A SpecError naming `function`'s argument `name` when `value` is not a `kind` (a bool is
    no number here), with `hint`, the way to make one; from a public function's first line,
    so that a wrong type is one line, not an AttributeError deep inside."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return
    wanted = " or ".join(k.__name__ for k in kinds)
    article = "an" if wanted[0] in "aeiouAEIOU" else "a"
    got = type(value).__name__
    raise SpecError([f"{function}: {name} must be {article} {wanted}, got {got}: {hint}"])


def _library_folders() -> tuple[str, ...]:
    """Folders whose frames are not the user's: trainfit's, torch's and Python's own library."""
    folders = [os.path.dirname(__file__), sysconfig.get_paths()["stdlib"]]
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        folders.append(os.path.dirname(torch.__file__))
    return tuple(os.path.join(os.path.realpath(f), "") for f in folders)


def user_frame(exc: BaseException) -> str | None:
    """`file:line` of the innermost frame of `exc`'s traceback outside trainfit, torch and
    Python's own library (where the user's code, or a model library such as transformers,
    raised it); None when every frame is one of those."""
    folders = _library_folders()
    found = None
    tb = exc.__traceback__
    while tb is not None:
        path = os.path.realpath(tb.tb_frame.f_code.co_filename)
        if not path.startswith(folders) and not path.startswith("<"):
            found = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


USER_CODE_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit)
"""What the user's code may raise where trainfit calls it (`except USER_CODE_ERRORS`): any
exception, and `sys.exit()` (a model or script that exits on a bad input), which would otherwise
end the process with the user's code and no message; KeyboardInterrupt is not one of them."""


def message_of(exc: BaseException) -> str:
    """`str(exc)`, or a placeholder where the exception's own `__str__` fails."""
    try:
        return str(exc)
    except Exception:  # NB: a user's exception class whose __str__ raises
        return "(its message could not be rendered)"


def raised_in_user_code(exc: BaseException) -> str:
    """One line for an exception of the user's code: `KeyError: 'labels' (at train.py:12)`,
    its type, the first line of its message and the user's frame where known (for a
    SyntaxError, the file and line it names)."""
    lines = message_of(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return text  # NB: its message names the file and line already
    where = user_frame(exc)
    return f"{text} (at {where})" if where else text
