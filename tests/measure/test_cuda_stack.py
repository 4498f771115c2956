"""`trainfit.measure.cuda_stack`: which GPUs a torch build has kernels for, and the torch wheel
for a driver."""

from __future__ import annotations

import pytest

from trainfit.measure.cuda_stack import has_kernels, wheel_for
from trainfit.report.doctor_words import wheel_text


@pytest.mark.parametrize(
    ("arch_list", "cc", "has"),
    [
        (("sm_80", "sm_90"), (9, 0), True),
        (("sm_80", "sm_90"), (8, 9), True),  # sm_80 code runs on every 8.x GPU
        (("sm_80", "sm_90"), (12, 0), False),
        (("sm_80", "compute_90"), (12, 0), True),  # PTX is compiled for later GPUs
        (("sm_90a", "sm_100f"), (10, 3), True),
        (("sm_86",), (8, 0), False),
    ],
)
def test_has_kernels(arch_list: tuple[str, ...], cc: tuple[int, int], has: bool) -> None:
    assert has_kernels(arch_list, cc) is has


@pytest.mark.parametrize(
    ("driver_cuda", "index"),
    [((13, 0), "cu130"), ((12, 7), "cu126"), ((12, 4), "cu124"), (None, "cu130")],
)
def test_the_wheel_is_the_newest_index_the_driver_runs(
    driver_cuda: tuple[int, int] | None, index: str
) -> None:
    assert wheel_text(wheel_for(driver_cuda)).startswith(
        f"pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/{index} "
    )


def test_the_wheel_for_a_driver_older_than_any_wheel() -> None:
    assert wheel_text(wheel_for((10, 2))) == (
        "upgrade the NVIDIA driver: it supports CUDA 10.2, older than any torch wheel (CUDA 11.8)"
    )
