"""`trainfit.specfile.fields`: every `plan` option has a field, every field is a plan option and
is documented in docs/spec-file.md."""

from __future__ import annotations

import dataclasses

from tests.specfile.plan_files import DOC
from trainfit.cli import spec_file
from trainfit.cli.main import _parser
from trainfit.cli.plan import COMMAND_LINE_ONLY
from trainfit.specfile import FIELDS, PlanOptions
from trainfit.specfile.fields import CARRIED, field_for_dest
from trainfit.specfile.options import PYTHON_ONLY


def test_every_plan_option_has_a_field() -> None:
    parser = spec_file.plan_parser(_parser)
    missing = [
        action.option_strings[0] if action.option_strings else action.dest
        for action in parser._actions
        if action.dest not in ("help", *COMMAND_LINE_ONLY) and field_for_dest(action.dest) is None
    ]
    assert missing == []


def test_every_field_is_documented() -> None:
    doc = DOC.read_text(encoding="utf-8")
    missing = [f.path for f in FIELDS if f"`{f.path}`" not in doc]
    missing += [path for path in CARRIED if f"`{path}`" not in doc]
    assert missing == []
    options = [f.option for f in FIELDS if f.option != "MODEL" and f"`{f.option}`" not in doc]
    assert options == []


def test_every_field_and_option_is_a_plan_option() -> None:
    names = {f.name for f in dataclasses.fields(PlanOptions)} - set(PYTHON_ONLY)
    assert [f.dest for f in FIELDS if f.dest not in names] == []
    parser = spec_file.plan_parser(_parser)
    dests = [a.dest for a in parser._actions if a.dest not in ("help", *COMMAND_LINE_ONLY)]
    assert sorted(dests) == sorted(names)
