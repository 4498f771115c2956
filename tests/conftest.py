"""Shared test settings."""

import os
import warnings

import pytest
import torch

from tests import measure_models

warnings.filterwarnings("ignore", message=".*Overriding a previously registered kernel.*")

# NB: traces are not kept on disk in tests (nor in the commands they start): a test that
# patches the tracer must trace; tests/trace/test_store.py switches the store on in a folder
# of its own
os.environ["TRAINFIT_NO_CACHE"] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _limits():
    """The scripted models' limits and call count (tests/measure_models.py), restored after each
    test: the measure tests and `trainfit measure`'s set them."""
    saved = dict(measure_models.LIMITS)
    measure_models.CALLS["forward"] = 0
    yield
    measure_models.LIMITS.update(saved)
