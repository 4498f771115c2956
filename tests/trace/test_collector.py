"""The cyclic collector paused for a block, and left as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from trainfit.trace.collector import collector_paused


@pytest.fixture
def collecting() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.usefixtures("collecting")
def test_the_collector_is_off_in_the_block_and_on_after_it() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # NB: the inner block leaves it to the outer one
    assert gc.isenabled()


@pytest.mark.usefixtures("collecting")
def test_the_collector_is_on_again_after_an_error() -> None:
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("x")
    assert gc.isenabled()


@pytest.mark.usefixtures("collecting")
def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
