"""trainfit's step time against the corpus's reproducible time rows.

For every reproducible time row: build the TrainSpec the row describes, trace it for the row's
device (CUDA of the card's compute capability, or MPS), and model its step time with the H100
calibration (`trainfit.timing.step.step_time`), unfitted (factor 1) and with the row's family
factor. The predicted step converts to the row's metric (samples/s = batch / step seconds;
seconds per `steps` steps; an epoch of `epoch_samples` samples in the row's unit).

    python -m benchmarks.external.compare trace      # trace every row's step, into the cache
    python -m benchmarks.external.compare fit        # fit the family factors on calibration rows
    python -m benchmarks.external.compare predict    # held-out predictions (results/)
    python -m benchmarks.external.compare report     # held-out errors (results/time_by_family.md)
    python -m benchmarks.external.compare record     # their check into families.json
    python -m benchmarks.external.compare apple-old     # version 2 on the Apple rows added since
    python -m benchmarks.external.compare apple-fit     # version 3's Apple factors, predictions
    python -m benchmarks.external.compare apple-report  # their errors (results/)
    python -m benchmarks.external.compare apple-record  # their check into families.json

Traces are cached in `CACHE` (a pickle outside git) because tracing ~90 steps on a small
machine takes a while; a cached entry is keyed by everything the trace depends on.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.external.load import CorpusRow, load_corpus
from benchmarks.external.models import DEFAULT_INPUTS
from trainfit.hardware.catalog import Device, get_device
from trainfit.spec import TrainSpec
from trainfit.timing.constants import calibration
from trainfit.timing.step import step_time
from trainfit.trace.costs import OpCost

RESULTS = Path(__file__).with_name("results")
CACHE = Path(os.environ.get("TRAINFIT_EXTERNAL_CACHE", "/tmp/trainfit_external_traces.pkl"))
SKIP_MODELS = frozenset()
"""Models too big to trace on a small machine (none so far)."""

_MINUTES = {"min": 60.0, "s": 1.0, "h": 3600.0}


@dataclass(frozen=True, slots=True)
class Traced:
    """What the step-time model needs from a trace."""

    costs: Any
    tokens_per_sample: int | None
    trainable_tensors: int


def time_rows(rows: list[CorpusRow] | None = None) -> list[CorpusRow]:
    """The reproducible time rows of the corpus, in file order."""
    rows = load_corpus() if rows is None else rows
    return [r for r in rows if r.kind == "time" and r.reproducible and r.trainfit_model]


def _inputs(row: CorpusRow) -> tuple[str, ...]:
    model = dict(row.trainfit_model or {})
    if model.get("inputs"):
        return tuple(model["inputs"])
    factory = str(model["model"]).rsplit(":", 1)[1]
    if factory == "resnet50" or factory in ("vgg16", "vgg16_bn_c10", "resnet50_c101"):
        size = row.image_size or 224
        return (f"x=B,3,{size},{size}:float32",)
    return DEFAULT_INPUTS[factory]


def build_spec(row: CorpusRow, device: str | None = None) -> TrainSpec:
    """The TrainSpec of a reproducible time row (micro-batch, inputs, precision, optimizer)
    on `device` (default: the row's device key)."""
    model = dict(row.trainfit_model or {})
    if row.batch is None:
        raise ValueError(f"corpus row {row.id!r} has no batch")
    return TrainSpec(
        model=str(model["model"]),
        batch=row.batch,
        inputs=_inputs(row),
        precision=str(model["precision"]),
        optimizer=str(model["optimizer"]),
        device=device or row.device_key,
    )


def _op_fields() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(OpCost))


def trace_key(spec: TrainSpec, device: Device) -> tuple:
    """What a trace depends on: the spec's step and the target (kind, compute capability),
    and the fields of the op table's entries (a cache made before a field was added is traced
    again rather than read with the field missing)."""
    target = ("mps",) if device.kind == "mps" else ("cuda", tuple(device.compute_capability))
    return (
        _op_fields(),
        spec.model,
        spec.batch,
        tuple(str(i) for i in spec.inputs),
        spec.precision.value,
        spec.optimizer.value,
        target,
    )


class _Unpickler(pickle.Unpickler):
    """Reads a cache written by `compare trace` run as __main__ (its entries pickled under
    that module's name) from any other entry point."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "__main__" and name == "Traced":
            return Traced
        return super().find_class(module, name)


def _load_cache() -> dict[tuple, Traced]:
    if CACHE.exists():
        with CACHE.open("rb") as handle:
            cached = _Unpickler(handle).load()
        # NB: entries traced before the op table's fields changed cannot be used (nor pickled
        # again): they are dropped and traced anew
        fields = _op_fields()
        return {key: item for key, item in cached.items() if key[0] == fields}
    return {}


def _save_cache(cache: Mapping[tuple, Traced]) -> None:
    tmp = CACHE.with_suffix(".tmp")
    with tmp.open("wb") as handle:
        pickle.dump(dict(cache), handle)
    tmp.replace(CACHE)


def traced(row: CorpusRow, cache: dict[tuple, Traced]) -> Traced:
    """The row's traced step, from the cache or traced now (and cached)."""
    from trainfit.trace.step import trace_step
    from trainfit.trace.target import Target

    spec = build_spec(row)
    device = get_device(row.device_key)
    key = trace_key(spec, device)
    if key not in cache:
        trace = trace_step(spec, target=Target.of(device))
        cache[key] = Traced(trace.costs, trace.tokens_per_sample, trace.trainable_tensors)
        _save_cache(cache)
    return cache[key]


def step_seconds(
    row: CorpusRow, item: Traced, factor: float = 1.0, classes: dict[str, float] | None = None
) -> float:
    """Modelled seconds of one step of the row on its device, the device's kernel times
    multiplied by `factor` (1: the H100 efficiencies as shipped, no family fit) and each op
    class's kernels by its factor in `classes` (timing.families)."""
    device = get_device(row.device_key)
    spec = build_spec(row, device.name)
    return step_time(
        item.costs,
        spec,
        device,
        item.tokens_per_sample,
        item.trainable_tensors,
        calibration(),
        device_time_factor=factor,
        op_class_factors=classes,
    ).seconds


def predicted_value(row: CorpusRow, seconds: float) -> float:
    """A step of `seconds` in the row's metric and unit."""
    assert row.batch is not None
    if row.metric == "train_throughput_samples_per_s":
        return row.batch / seconds
    if row.metric == "train_step_time_s":
        return seconds * float(row.extra.get("steps", 1))
    if row.metric == "train_epoch_time_s":
        steps = math.ceil(int(row.extra["epoch_samples"]) / row.batch)
        return steps * seconds / _MINUTES[str(row.unit)]
    raise ValueError(f"corpus row {row.id!r}: metric {row.metric!r} is not a time metric")


def time_ratio(row: CorpusRow, predicted: float) -> float:
    """Predicted over measured step time (> 1: trainfit says slower than measured)."""
    assert row.value is not None
    if row.metric == "train_throughput_samples_per_s":
        return row.value / predicted
    return predicted / row.value


def trace_all(rows: list[CorpusRow]) -> None:
    """Trace every row into the cache, printing progress (a development command)."""
    cache = _load_cache()
    for i, row in enumerate(rows, 1):
        if dict(row.trainfit_model or {}).get("model") in SKIP_MODELS:
            continue
        try:
            traced(row, cache)
            print(f"{i}/{len(rows)} {row.id}", flush=True)
        except Exception as exc:  # a development loop reports and goes on
            print(f"{i}/{len(rows)} {row.id} FAILED {type(exc).__name__}: {exc}", flush=True)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "trace"
    rows = time_rows()
    if command == "trace":
        trace_all(rows)
        return 0
    if command.startswith("apple-"):
        from benchmarks.external import fit_apple

        return fit_apple.main(command, load_corpus())
    from benchmarks.external import fit

    return fit.main(command, rows)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
