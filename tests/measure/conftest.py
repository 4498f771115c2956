"""The scripted models' limits and call count, restored after each measure test."""

from __future__ import annotations

import pytest

from tests import measure_models


@pytest.fixture(autouse=True)
def _limits():
    saved = dict(measure_models.LIMITS)
    measure_models.CALLS["forward"] = 0
    yield
    measure_models.LIMITS.update(saved)
