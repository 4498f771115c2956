"""The specfile package imports its parts on first use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import trainfit.specfile


def test_every_public_name_resolves_to_its_module_s() -> None:
    for name in trainfit.specfile.__all__:
        value = getattr(trainfit.specfile, name)
        home = getattr(value, "__module__", None)
        assert home is None or home.startswith("trainfit.specfile."), (name, home)
    assert trainfit.specfile.FIELDS is trainfit.specfile.fields.FIELDS
    assert set(trainfit.specfile.__all__) <= set(dir(trainfit.specfile))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        trainfit.specfile.no_such_name  # noqa: B018


def test_reading_run_options_leaves_the_plan_unimported() -> None:
    # NB: `trainfit estimate` reads its run options through `checks`; the runner (the plan,
    # the exporters) is not needed for that, and the plan's worker pool module, once imported,
    # makes the CLI exit the slow way (`trainfit.cli.main.entry`: the interpreter's teardown)
    code = (
        "import sys\n"
        "from trainfit.specfile import checks\n"
        "import json\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('trainfit.', 'conc')))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = json.loads(out)
    assert "trainfit.specfile.checks" in loaded
    for unused in (
        "trainfit.specfile.run",
        "trainfit.plan.search",
        "trainfit.export.write",
        "concurrent.futures.process",
    ):
        assert unused not in loaded
