"""How outputs name a live model (`trainfit.models.live`): by its class, never by its import
path, which resolves only in the process that registered it.

A live model's import paths are `trainfit.models.live:model_N` (its factory) and `step_N`
(its step); `name_live_model` keeps each `model_N`'s class name for the process's life (a
few bytes each), so that a result outliving the registration still names its model.
"""

from __future__ import annotations

PREFIX = "trainfit.models.live:"
"""What a live model's import paths begin with."""

_CLASSES: dict[str, str] = {}
"""`model_N` -> the class name of the live model registered as it."""


def name_live_model(key: str, class_name: str) -> None:
    """Remember that `trainfit.models.live:<key>` (`model_N`) is a live `class_name`."""
    _CLASSES[key] = class_name


def is_live(path: str | None) -> bool:
    """Whether an import path is a live model's (`trainfit.models.live:model_N`, `step_N`):
    it resolves in this process only."""
    return isinstance(path, str) and path.startswith(PREFIX)


def live_class(path: str) -> str | None:
    """The class name of the live model behind a live import path (its `model_N` or `step_N`);
    None for a path that is no live model's or was registered in another process."""
    if not is_live(path):
        return None
    return _CLASSES.get(path.removeprefix(PREFIX).replace("step_", "model_", 1))


def model_name(model: str) -> str:
    """A model as an output names it: the name or path given, or a live model's class name
    (`Net`)."""
    if not is_live(model):
        return model
    return live_class(model) or "live module"


def model_label(model: str) -> str:
    """`model_name`, a live model's said to be one (`Net (live module)`): what a report, a
    config file and a result give as the model of a live one."""
    if not is_live(model):
        return model
    name = live_class(model)
    return f"{name} (live module)" if name else "a live module"
