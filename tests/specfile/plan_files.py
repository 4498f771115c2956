"""The spec-file tests' files: a full file and the command line it stands for, and helpers
that write, parse and resolve one."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trainfit.cli import plan as plan_command
from trainfit.cli import spec_file
from trainfit.cli.main import _parser
from trainfit.errors import SpecFileError
from trainfit.specfile import (
    ModelOptions,
    PlanOptions,
    load_plan_spec,
    parse_plan_spec,
    resolve_plan_file,
)

MLP = "trainfit.models.zoo:emotion_mlp"
DOC = Path(__file__).resolve().parents[2] / "docs" / "spec-file.md"


def _write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _problems(text: str) -> list[str]:
    with pytest.raises(SpecFileError) as info:
        parse_plan_spec(textwrap.dedent(text).lstrip("\n"), "spec.yaml")
    return list(info.value.problems)


def _resolved(path: Path, *typed: str) -> list[PlanOptions]:
    return [m.options for m in _models(path, *typed)]


def _models(path: Path, *typed: str) -> tuple[ModelOptions, ...]:
    planfile = load_plan_spec(path)
    given = plan_command.typed_options(
        spec_file.typed_options(_parser, ["plan", str(path), *typed])
    )
    return resolve_plan_file(planfile, given)


def _command_line(*argv: str) -> PlanOptions:
    return plan_command.options_of(_parser().parse_args(["plan", *argv]))


FULL = f"""
title: "emotion MLP on an H100"
description: |
  A small classifier, sized for a quick plan.
model:
  name: mlp
  model: {MLP}
  multiplier: 2
data:
  samples: 1e5
  eval_fraction: 0.1
training:
  effective_batch: 64
  epochs: 2
  optimizer: sgd
  freeze: ["layers.0.*"]
devices: [h100, a100-80gb]
gpus: 2
margin: 0.2
jobs: 1
cost:
  kwh_price: 0.3
  years: 2
  hours_per_year: 500
  deadline: 100
  prices: {{aws-p5.48xlarge: 50.5}}
measured: {{step: 0.5, on: h100}}
outputs:
  json: true
claims:
  - what: "peak memory on the H100"
    quantity: memory_gib
    value: [1, 2]
    source: "the design doc, section 3"
"""
FULL_ARGV = [
    MLP,
    "--multiplier", "2",
    "--samples", "100000",
    "--eval-fraction", "0.1",
    "--effective-batch", "64",
    "--epochs", "2",
    "--optimizer", "sgd",
    "--freeze", "layers.0.*",
    "--device", "h100",
    "--device", "a100-80gb",
    "--gpus", "2",
    "--margin", "0.2",
    "--jobs", "1",
    "--kwh-price", "0.3",
    "--years", "2",
    "--hours-per-year", "500",
    "--deadline", "100",
    "--price", "aws-p5.48xlarge=50.5",
    "--measured-step", "0.5",
    "--measured-on", "h100",
    "--json",
]  # fmt: skip
