"""How fast the user's own data loader delivers samples, on this machine (`trainfit measure-data`).

The loader comes from a factory the user names (`package.module:make_loader`, called with no
arguments), so the measurement uses their dataset, transforms, `num_workers` and `batch_size`.
The first batch is timed apart: it includes starting the worker processes and warming caches,
which a training run pays once.

Known limitations: a batch's samples are counted along the first dimension of its first tensor
(a tensor, a tuple or list, or a dict of tensors); on a machine other than the training one,
disk, CPU cores and page cache differ, so measure where you train.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from trainfit.errors import USER_CODE_ERRORS, TrainfitError, raised_in_user_code
from trainfit.models.imports import resolve


class DataLoaderError(TrainfitError):
    """The user's loader factory or its batches could not be measured."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DataRate:
    """Samples per second of a data loader, over batches after the first."""

    batches: int
    """Batches timed after the first."""
    samples: int
    """Samples in those batches."""
    seconds: float
    """Time for those batches."""
    first_batch_seconds: float
    """Time to the first batch (worker start-up, first reads)."""

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else float("inf")


BatchCallback = Callable[[int, int, float], None]
"""Called after each batch with (batch index, its samples, seconds since the start)."""


def batch_samples(batch: Any) -> int:
    """Samples in `batch`: the first dimension of its first tensor."""
    first = batch
    while isinstance(first, (tuple, list, dict)):
        if not first:
            raise DataLoaderError("a batch is empty: no tensor to count its samples")
        first = next(iter(first.values())) if isinstance(first, dict) else first[0]
    shape = getattr(first, "shape", None)
    if not shape:
        raise DataLoaderError(
            f"cannot count the samples of a batch whose first item is {type(first).__name__}: "
            "yield tensors (or tuples, lists or dicts of tensors) with the batch first"
        )
    return int(shape[0])


def measure_data(
    loader: str | Callable[[], Iterable[Any]] | Iterable[Any],
    batches: int = 50,
    on_batch: BatchCallback | None = None,
) -> DataRate:
    """Time `batches` batches of `loader` (after a first, timed apart)."""
    if not isinstance(batches, int) or batches < 1:
        raise DataLoaderError(f"batches must be a positive integer, got {batches!r}")
    if isinstance(loader, str):
        loader = resolve(loader, "data loader factory")
    source = (
        _users(loader, "the data loader factory")
        if callable(loader) and not hasattr(loader, "__iter__")
        else loader
    )
    try:
        stream: Iterator[Any] = iter(source)
    except TypeError as exc:
        raise DataLoaderError(
            f"the loader factory returned {type(source).__name__}, which is not iterable: "
            "return a torch.utils.data.DataLoader (or any iterable of batches)"
        ) from exc
    start = time.perf_counter()
    first = _users(lambda: next(stream, None), "the data loader")
    if first is None:
        raise DataLoaderError("the data loader yielded no batch")
    first_seconds = time.perf_counter() - start
    if on_batch:
        on_batch(0, batch_samples(first), first_seconds)
    timed_start = time.perf_counter()
    samples = count = 0
    while count < batches:
        batch = _users(lambda: next(stream, None), "the data loader")
        if batch is None:
            break
        count += 1
        size = batch_samples(batch)
        samples += size
        if on_batch:
            on_batch(count, size, time.perf_counter() - start)
    if count == 0:
        raise DataLoaderError(
            "the data loader yielded only one batch: give it more data to time, or a smaller "
            "batch size"
        )
    return DataRate(
        batches=count,
        samples=samples,
        seconds=time.perf_counter() - timed_start,
        first_batch_seconds=first_seconds,
    )


def _users(call: Callable[[], Any], what: str) -> Any:
    """`call()`, an exception of the user's code reported as one line with its type."""
    try:
        return call()
    except TrainfitError:
        raise
    except USER_CODE_ERRORS as exc:  # the user's own code: its type and message, no traceback
        raise DataLoaderError(f"{what} raised {raised_in_user_code(exc)}") from exc
