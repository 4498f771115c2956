"""Resolving `package.module:attribute` import paths given by the user."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

from trainfit.errors import USER_CODE_ERRORS, ModelLoadError, raised_in_user_code
from trainfit.models.live_names import is_live, model_label

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def is_import_path(text: str) -> bool:
    """True for `pkg.module:attr` (and not for a Windows drive such as `C:\\x`)."""
    return bool(_IMPORT_PATH.match(text))


def resolve(path: str, what: str) -> Callable[..., Any]:
    """Import `pkg.module:attr` and return the attribute, which must be callable."""
    if not is_import_path(path):
        raise ModelLoadError(
            f"{what} {path!r} is not an import path of the form package.module:name"
        )
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelLoadError(
            f"cannot import module {module_name!r} for {what} {path!r}: {exc}; "
            "check the name and that its folder is on PYTHONPATH"
        ) from exc
    except USER_CODE_ERRORS as exc:  # NB: the user's module failed while it was imported
        raise ModelLoadError(
            f"importing module {module_name!r} for {what} {path!r} failed: "
            f"{raised_in_user_code(exc)}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part) and is_live(path):
            raise ModelLoadError(_gone(path, what))
        if not hasattr(obj, part):
            raise ModelLoadError(
                f"module {module_name!r} has no attribute {attr!r} ({what} {path!r})"
            )
        obj = getattr(obj, part)
    if not callable(obj):
        raise ModelLoadError(f"{what} {path!r} is not callable")
    return obj


def _gone(path: str, what: str) -> str:
    """Why a live model's import path no longer resolves, and the way out."""
    return (
        f"the {what} of {model_label(path)} is gone: a live model's import path resolves only "
        "while the call that registered it runs, or while its result keeps it (a run_plan "
        "result, an autofit Fit); pass the module again, e.g. estimate(model=net, sample=batch)"
    )
