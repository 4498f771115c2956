"""TrainSpec and InputSpec validation."""

import pytest
import torch

from trainfit.errors import SpecError, UnknownNameError
from trainfit.spec import InputSpec, OptimizerKind, Precision, TrainSpec


def test_strings_become_enums() -> None:
    spec = TrainSpec(model="gpt2", precision="BF16", optimizer="sgd_momentum")
    assert spec.precision is Precision.BF16
    assert spec.optimizer is OptimizerKind.SGD_MOMENTUM


def test_unknown_precision_lists_close_matches() -> None:
    with pytest.raises(SpecError, match=r"unknown precision 'bf17'; did you mean 'bf16'"):
        TrainSpec(precision="bf17")


def test_all_problems_reported_together() -> None:
    with pytest.raises(SpecError) as info:
        TrainSpec(batch=0, grad_accum=-1, optimizer="lion", device="h10")
    text = str(info.value)
    assert "batch must be a positive integer, got 0" in text
    assert "grad_accum must be a positive integer, got -1" in text
    assert "unknown optimizer 'lion'" in text
    assert "unknown device 'h10'" in text
    assert len(info.value.problems) == 4


def test_conflicting_loss_and_step_fn() -> None:
    with pytest.raises(SpecError, match="--loss and --step-fn conflict"):
        TrainSpec(loss="a.b:c", step_fn="a.b:d")


def test_an_input_given_twice_is_an_error() -> None:
    with pytest.raises(SpecError, match=r"^input 'x' is given 2 times: give each forward\(\) "):
        TrainSpec(model="x.y:z", inputs=("x=B,4", "x=B,8", "y=B,2"))


def test_input_parsing() -> None:
    spec = InputSpec.parse("ids=B,512:int64<50257")
    assert spec.name == "ids"
    assert spec.dims == ("B", 512)
    assert spec.dtype == torch.int64
    assert spec.high == 50257
    assert spec.shape(8) == (8, 512)
    assert InputSpec.parse("x=B,3,224,224").dtype == torch.float32


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x=B,3,-4:float32", r"dimension '-4' is neither B nor a positive int"),
        ("x B,3", r"malformed input 'x B,3': expected NAME=DIMS"),
        ("x=B,3:float33", r"unknown input dtype 'float33'"),
        ("x=B,3:float32<5", r"'<5' is a value bound for integer inputs only"),
    ],
)
def test_malformed_inputs(text: str, message: str) -> None:
    with pytest.raises((SpecError, UnknownNameError), match=message):
        InputSpec.parse(text)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"model": torch.nn.Linear(4, 4)}, r"model is a live Linear: .*estimate\(model=module"),
        ({"model": 3}, r"model must be .* \(str\), got int"),
        ({"device": ["h100"]}, r"device must be one device's name \(str; .*got list"),
        ({"loss": len}, r"loss is a callable: name it as pkg.module:fn, or give it with a live"),
        ({"step_fn": 1.5}, r"step_fn must be pkg.module:fn \(str\), got float"),
        ({"freeze": [1]}, r"freeze must be a list of str, got \[1\]"),
    ],
)
def test_a_field_of_the_wrong_type_is_named(fields: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        TrainSpec(**fields)


def test_one_string_where_a_list_is_expected_is_one_item() -> None:
    spec = TrainSpec(model="x.y:z", freeze="encoder.*", inputs="x=B,4")
    assert spec.freeze == ("encoder.*",)
    assert [i.name for i in spec.inputs] == ["x"]
