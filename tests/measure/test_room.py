"""`trainfit.measure.room`: a busy GPU says what is free and what fits."""

from __future__ import annotations

import pytest

from tests.measure.fakes import FakeCuda, GiB
from trainfit.errors import MeasureError
from trainfit.estimator.step import estimate
from trainfit.spec import TrainSpec


@pytest.mark.slow
def test_busy_gpu_says_what_is_free_and_what_fits(monkeypatch):
    from trainfit.measure.room import check_room

    spec = TrainSpec(model="gpt2", batch=16, seq_len=1024, precision="bf16", device="h100")
    result = estimate(spec)
    busy = FakeCuda(total=80 * GiB, free=6 * GiB)
    with pytest.raises(MeasureError) as info:
        check_room(spec, busy, result)
    text = str(info.value)
    assert text.startswith(
        "Fake H100 has 6.00 GiB free of 80.00 GiB (other processes and this one's CUDA "
        "context hold 74.00 GiB) and this step needs about"
    )
    assert "fits in what is free (estimated): use --batch" in text
    assert text.endswith("free the GPU, or pass --force to try anyway")
    check_room(spec, FakeCuda(free=79 * GiB), result)  # room enough: no error
