"""The one GiB constant and its formatter."""

from __future__ import annotations

from trainfit.hardware.units import GIB, gib


def test_gib_is_two_to_the_thirty_and_is_shown_with_two_decimals() -> None:
    assert GIB == 1_073_741_824
    assert gib(3 * GIB // 2) == "1.50 GiB"
    assert gib(0) == "0.00 GiB"
