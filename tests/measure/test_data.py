"""measure_data: the user's own loader timed, its samples counted, its errors one line."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainfit.measure.data import DataLoaderError, batch_samples, measure_data


def _loader(n: int = 256, batch: int = 16) -> DataLoader:
    return DataLoader(TensorDataset(torch.randn(n, 4), torch.zeros(n)), batch_size=batch)


def test_counts_samples_after_the_first_batch() -> None:
    seen: list[tuple[int, int]] = []
    rate = measure_data(_loader, batches=5, on_batch=lambda i, n, s: seen.append((i, n)))
    assert rate.batches == 5 and rate.samples == 80
    assert seen == [(0, 16), (1, 16), (2, 16), (3, 16), (4, 16), (5, 16)]
    assert rate.samples_per_second == pytest.approx(80 / rate.seconds)


def test_stops_at_the_end_of_the_loader() -> None:
    rate = measure_data(_loader(64, 16), batches=50)
    assert rate.batches == 3 and rate.samples == 48  # 4 batches, the first timed apart


@pytest.mark.parametrize(
    ("batch", "samples"),
    [(torch.zeros(7, 3), 7), ((torch.zeros(5), torch.zeros(5)), 5), ({"x": torch.zeros(9, 2)}, 9)],
)
def test_batch_samples(batch: object, samples: int) -> None:
    assert batch_samples(batch) == samples


def test_bad_loaders_are_one_line() -> None:
    with pytest.raises(DataLoaderError, match="not iterable"):
        measure_data(lambda: 3)
    with pytest.raises(DataLoaderError, match="only one batch"):
        measure_data(_loader(16, 16))
    with pytest.raises(DataLoaderError, match="cannot count the samples"):
        measure_data(lambda: iter(["a", "b"]))
    with pytest.raises(DataLoaderError, match="batches must be"):
        measure_data(_loader, batches=0)


def test_the_users_exception_is_named() -> None:
    def broken():
        raise KeyError("no such split")
        yield

    with pytest.raises(DataLoaderError, match="the data loader raised KeyError"):
        measure_data(broken)
