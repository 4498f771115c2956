"""`PlanOptions` from Python: each field's type is checked; one string is one item of a list."""

from __future__ import annotations

import pytest

from trainfit.errors import SpecError
from trainfit.specfile.options import PlanOptions


def test_one_device_name_is_one_device_not_its_letters() -> None:
    assert PlanOptions(model="gpt2", device="rtx-4060").device == ("rtx-4060",)
    assert PlanOptions(model="gpt2", device=["h100", "t4"]).device == ("h100", "t4")


def test_every_field_of_the_wrong_type_is_named() -> None:
    with pytest.raises(SpecError) as raised:
        PlanOptions(model=3, margin="0.1", json=1, infer_batch=[1, "2"], epochs=True)  # type: ignore[arg-type]
    assert raised.value.problems == (
        "PlanOptions.model must be str (a catalog name, a directory or pkg.module:factory) or "
        "a live nn.Module, got 3",
        "PlanOptions.margin must be float, got '0.1'",
        "PlanOptions.json must be bool, got 1",
        "PlanOptions.infer_batch must be tuple[int, ...], got (1, '2')",
        "PlanOptions.epochs must be float, got True",
    )
