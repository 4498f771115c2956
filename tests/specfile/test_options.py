"""`PlanOptions` from Python: each field's type is checked; one string is one item of a list."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainfit.errors import SpecError
from trainfit.specfile.loader import parse_plan_spec
from trainfit.specfile.options import PlanOptions, resolve_plan_file


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


def test_a_live_module_takes_its_sample_and_callables() -> None:
    net = nn.Linear(4, 2)
    options = PlanOptions(
        model=net, sample=(torch.randn(3, 4), torch.randn(3, 2)), loss=F.mse_loss,
        effective_batch=8,
    )  # fmt: skip
    assert options.model is net and options.loss is F.mse_loss


@pytest.mark.parametrize(
    ("fields", "problems"),
    [
        (
            {"model": nn.Linear(4, 2)},
            ["model is a live Linear: give its batch too, e.g. "
             "PlanOptions(model=module, sample=torch.randn(8, 4))"],
        ),
        (
            {"model": "gpt2", "sample": torch.randn(2, 4)},
            ["sample is the batch of a live model: give model=<an nn.Module>"],
        ),
        (
            {"model": "gpt2", "loss": F.mse_loss},
            ["PlanOptions.loss is a callable, which only a live model takes: give "
             "model=<an nn.Module> with its sample, or name it as pkg.module:fn"],
        ),
        (
            {"model": nn.Linear(4, 2), "sample": torch.randn(2, 4), "step_fn": "a.b:c"},
            ["step_fn of a live model is the function itself, got str 'a.b:c': pass the "
             "callable, e.g. step_fn=my_step"],
        ),
        (
            {"model": nn.Linear(4, 2), "sample": torch.randn(2, 4), "input": "x=B,4"},
            ["inputs of a live model come from its sample: drop inputs"],
        ),
        (
            {"model": nn.Linear(4, 2), "sample": torch.randn(2, 4), "export": ("hf", "torchrun"),
             "config_dir": "c", "report": "r"},
            ["export 'torchrun' writes a training script that imports the model by its import "
             "path, which a live Linear has not: give the model as pkg.module:factory to export "
             "torchrun, or export one of hf, lightning, accelerate, yaml, deepspeed for your own "
             "training script"],
        ),
        (
            {"model": nn.Linear(4, 2), "sample": 3},
            ["PlanOptions.sample must be a tensor, a tuple or list of tensors, or a dict of "
             "tensors (or None), got 3"],
        ),
    ],
)  # fmt: skip
def test_a_live_module_s_fields_are_checked_in_one_line_each(
    fields: dict[str, object], problems: list[str]
) -> None:
    with pytest.raises(SpecError) as raised:
        PlanOptions(**fields)  # type: ignore[arg-type]
    assert list(raised.value.problems) == problems


def test_a_value_whose_repr_spans_lines_is_named_by_its_type() -> None:
    with pytest.raises(SpecError) as raised:
        PlanOptions(
            model=nn.Linear(4, 2), sample=torch.randn(2, 4), loss=3,
            device=nn.Sequential(nn.Linear(4, 2), nn.ReLU()), input=torch.zeros(20, 20),
        )  # type: ignore[arg-type]  # fmt: skip
    assert list(raised.value.problems) == [
        "PlanOptions.input must be tuple[str, ...], got a Tensor",
        "PlanOptions.loss must be pkg.module:fn (str), a callable with a live model, or None, "
        "got 3",
        "PlanOptions.device must be tuple[str, ...], got a Sequential",
    ]


def test_a_spec_file_s_overrides_take_no_live_model() -> None:
    plan_file = parse_plan_spec("model: gpt2\ntraining: {effective_batch: 8}\n")
    with pytest.raises(SpecError, match=r"its overrides take no live model \(model, sample\); "):
        resolve_plan_file(plan_file, {"model": nn.Linear(4, 2), "sample": torch.randn(2, 4)})
