"""The torch-release check in front of the tracer's private-API use."""

from __future__ import annotations

import pytest

from trainfit.errors import TraceError
from trainfit.trace import compat


def test_tested_release_gives_no_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat.torch, "__version__", "2.13.0+cpu")
    assert compat.check_torch() is None


def test_untested_release_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat.torch, "__version__", "2.12.1+cu126")
    assert compat.check_torch() == compat.UntestedTorch(release=(2, 12), tested=compat.TESTED)


def test_too_old_release_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat.torch, "__version__", "2.3.1")
    with pytest.raises(TraceError, match=r"torch 2.3.1 is too old .*needs >= 2.4.*upgrade torch"):
        compat.check_torch()


def test_moved_internal_names_the_release() -> None:
    error = compat.internal_moved(AttributeError("no attribute 'from_meta_and_device'"))
    assert "from_meta_and_device" in str(error) and compat.torch.__version__ in str(error)
