"""Shared test settings."""

import warnings

import pytest
import torch

warnings.filterwarnings("ignore", message=".*Overriding a previously registered kernel.*")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
