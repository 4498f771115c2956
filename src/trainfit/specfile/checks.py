"""The run, stage, LoRA and calibration options read into typed values, every bad value named
with the option that gave it (shared by `trainfit plan` and `trainfit estimate --time`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Protocol

from trainfit.errors import SpecError
from trainfit.spec import TrainSpec
from trainfit.timing.run import DEFAULT_KWH_PRICE, MAX_EPOCHS, RunSpec


class RunOptions(Protocol):
    """The run-size and price options (`PlanOptions`, or the `estimate` command's)."""

    samples: int | None
    tokens: int | None
    epochs: float
    eval_fraction: float
    data_rate: float | None
    gpus: int
    kwh_price: float
    watts: float | None
    currency: str
    fx: float | None
    years: float
    hours_per_year: float
    deadline: float | None
    price: Sequence[str]
    stage: Sequence[str]


def run_spec(options: RunOptions) -> RunSpec:
    """The RunSpec the options describe (SpecError lists every bad price)."""
    overrides: dict[str, float] = {}
    problems = []
    for item in options.price:
        name, _, value = item.partition("=")
        try:
            overrides[name.strip()] = float(value)
        except ValueError:
            problems.append(
                f"--price {item!r}: expected INSTANCE=USD_PER_HOUR, e.g. aws-g5.xlarge=1.0"
            )
    if problems:
        raise SpecError(problems)
    return RunSpec(
        samples=options.samples,
        tokens=options.tokens,
        epochs=options.epochs,
        eval_fraction=options.eval_fraction,
        data_rate=options.data_rate,
        gpus=options.gpus,
        kwh_price=options.kwh_price,
        currency=options.currency.upper(),
        usd_rate=options.fx,
        years=options.years,
        hours_per_year=options.hours_per_year,
        watts=options.watts,
        deadline_hours=options.deadline,
        price_overrides=overrides,
    )


def check_sized(run: RunSpec, options: RunOptions, *, gpus_need_size: bool = False) -> None:
    """Options that only mean something with a data size must come with one (`gpus` too where
    `gpus_need_size`: a one-device estimate); epochs and stages exclude each other."""
    loose = [
        flag
        for flag, given in (
            ("--deadline", options.deadline is not None),
            ("--stage", bool(options.stage)),
            ("--eval-fraction", options.eval_fraction != 0.0),
            ("--data-rate", options.data_rate is not None),
            ("--price", bool(options.price)),
            ("--gpus", options.gpus != 1 and gpus_need_size),
            ("--watts", options.watts is not None),
            ("--fx", options.fx is not None),
            ("--currency", options.currency.upper() != "USD"),
            ("--kwh-price", options.kwh_price != DEFAULT_KWH_PRICE),
            ("--epochs", options.epochs != 1.0),
        )
        if given
    ]
    if loose and not run.sized:
        raise SpecError(
            [
                f"{', '.join(loose)} {'needs' if len(loose) == 1 else 'need'} the data size: "
                "give --samples or --tokens per epoch"
            ]
        )
    if options.stage and options.epochs != 1.0:
        raise SpecError(["give --epochs or --stage, not both: the stages set the epochs"])


def stages(items: Sequence[str], spec: TrainSpec) -> list[tuple[str, float, TrainSpec]]:
    """`EPOCHS[:PATTERN,...]` stages as (name, epochs, the stage's spec)."""
    out = []
    problems = []
    for number, item in enumerate(items, 1):
        epochs_text, _, patterns = item.partition(":")
        try:
            epochs = float(epochs_text)
        except ValueError:
            problems.append(
                f"--stage {item!r}: expected EPOCHS[:PATTERN,...], e.g. --stage '5:backbone.*'"
            )
            continue
        if not 0 < epochs <= MAX_EPOCHS:
            problems.append(
                f"--stage {item!r}: epochs must be positive and at most {MAX_EPOCHS:g}, "
                f"got {epochs_text}"
            )
            continue
        freeze = tuple(p for p in patterns.split(",") if p) if patterns else spec.freeze
        name = f"stage {number}" + (f" (frozen {', '.join(freeze)})" if freeze else "")
        out.append((name, epochs, dataclasses.replace(spec, freeze=freeze)))
    if problems:
        raise SpecError(problems)
    return out


def measured(step: float | None, on: str | None, default_device: str) -> tuple[float, str] | None:
    """A measured step's seconds and device (default `default_device`), checked."""
    if step is None:
        if on:
            raise SpecError(["--measured-on needs --measured-step SECONDS"])
        return None
    if not 0 < step < math.inf:
        raise SpecError([f"--measured-step must be a positive number of seconds, got {step}"])
    return step, on or default_device


def lora_fields(
    rank: int | None,
    alpha: float | None,
    dropout: float | None,
    targets: str | None,
    qlora: bool,
) -> dict[str, object] | None:
    """The LoRA settings of the options (a dict of LoraSpec's fields), or None."""
    if rank is None and not qlora:
        given = [
            flag
            for flag, value in (
                ("--lora-alpha", alpha),
                ("--lora-dropout", dropout),
                ("--lora-targets", targets),
            )
            if value is not None
        ]
        if given:
            raise SpecError([f"{', '.join(given)} given without --lora RANK: add --lora RANK"])
        return None
    fields: dict[str, object] = {"rank": 8 if rank is None else rank, "qlora": qlora}
    if alpha is not None:
        fields["alpha"] = alpha
    if dropout is not None:
        fields["dropout"] = dropout
    if targets is not None:
        fields["targets"] = tuple(targets.split(","))
    return fields
