"""`trainfit.specfile.options`: a spec file's options are the command line's, with the command
line winning, a model entry's values replacing the top level's, and names checked at their
lines; `PlanOptions` from Python: each field's type is checked; one string is one item of a
list."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.specfile.plan_files import (
    FULL,
    FULL_ARGV,
    MLP,
    _command_line,
    _models,
    _resolved,
    _write,
)
from trainfit.errors import SpecError, SpecFileError, UnknownNameError
from trainfit.specfile import ClaimQuantity, load_plan_spec
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


def test_file_gives_the_command_lines_options(tmp_path: Path) -> None:
    path = _write(tmp_path, FULL)
    (model,) = _models(path)
    assert model.options == _command_line(*FULL_ARGV)
    assert (model.name, model.index) == ("mlp", 0)
    planfile = load_plan_spec(path)
    assert planfile.title == "emotion MLP on an H100"
    assert planfile.description == "A small classifier, sized for a quick plan.\n"
    (claim,) = planfile.claims or ()
    assert claim.quantity is ClaimQuantity.MEMORY_GIB
    assert claim.value == [1.0, 2.0]


def test_stages_prices_and_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "hf-model").mkdir()
    path = _write(
        tmp_path,
        """
        models:
          - model: hf-model
          - model: gpt2
        data: {tokens: 1000000}
        training:
          effective_batch: 8
          freeze: [embed.*]
          stages:
            - {epochs: 5, freeze: ["backbone.*", "head.*"]}
            - {epochs: 0.5}
        outputs: {config_dir: configs, export: [hf, yaml], export_dir: /abs/out}
        """,
    )
    first, second = _resolved(path)
    assert first.model == str(tmp_path / "hf-model")
    assert second.model == "gpt2"  # NB: no such directory: a catalog name stays one
    assert first.stage == ("5.0:backbone.*,head.*", "0.5")
    assert first.freeze == ("embed.*",)
    assert first.export == ("hf", "yaml")
    # several models: each writes under its own subdirectory
    assert first.config_dir == str(tmp_path / "configs" / "hf-model")
    assert second.config_dir == str(tmp_path / "configs" / "gpt2")
    assert second.export_dir == "/abs/out/gpt2"


def test_command_line_overrides_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, FULL)
    # --margin 0.1 is the parser's default: typed, it still wins over the file's 0.2
    (ns,) = _resolved(path, "--device", "rtx-4060", "--margin", "0.1", "--effective-batch", "8")
    assert ns.device == ("rtx-4060",)
    assert ns.margin == 0.1
    assert ns.effective_batch == 8
    assert ns.optimizer == "sgd"  # not typed: the file's


def test_names_are_checked_at_their_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        f"""
        model: {MLP}
        training:
          effective_batch: 8
          precision: bf17
        devices:
          - h100
          - h10
        cost: {{currency: XYZ}}
        data: {{samples: 100}}
        outputs: {{export: [hf, word]}}
        """,
    )
    with pytest.raises(SpecFileError) as info:
        _resolved(path)
    assert list(info.value.problems) == [
        f"{path}:4: training.precision: unknown precision 'bf17'; did you mean 'bf16', 'fp16'?",
        f"{path}:7: devices[1]: unknown device 'h10'; did you mean 'h100', 'a10', 'h200'? "
        "(run `trainfit devices` for the list)",
        f"{path}:8: cost.currency: unknown currency 'XYZ': use one of USD, EUR, GBP, JPY, CNY, "
        "INR, CAD, AUD, CHF, KRW, SEK, BRL",
        f"{path}:10: outputs.export: 'word' is not one of hf, lightning, accelerate, yaml, "
        "torchrun, deepspeed",
    ]


def test_the_command_lines_defaults_are_the_plan_options() -> None:
    assert _command_line("gpt2") == PlanOptions(model="gpt2")


def test_an_unknown_override_lists_the_options() -> None:
    planfile = parse_plan_spec("model: gpt2\ntraining: {effective_batch: 8}\n")
    with pytest.raises(UnknownNameError, match="unknown plan option 'sed'"):
        resolve_plan_file(planfile, {"sed": 128})


def test_nearer_alternative_replaces_the_other(tmp_path: Path) -> None:
    """--stage typed replaces the file's epochs; a model's tokens replace the file's samples."""
    path = _write(
        tmp_path,
        f"""
        models:
          - {{name: a, model: "{MLP}"}}
          - {{name: b, model: "{MLP}", tokens: 5000, stages: [{{epochs: 2}}]}}
        data: {{samples: 100}}
        training: {{effective_batch: 8, epochs: 3}}
        """,
    )
    a, b = _resolved(path)
    assert (a.samples, a.tokens, a.epochs, a.stage) == (100, None, 3.0, ())
    assert (b.samples, b.tokens, b.epochs, b.stage) == (None, 5000, 1.0, ("2.0",))
    a, b = _resolved(path, "--stage", "4")
    assert (a.epochs, a.stage) == (1.0, ("4",))
    assert (b.epochs, b.stage) == (1.0, ("4",))


def test_dot_relative_model_is_a_path(tmp_path: Path) -> None:
    path = _write(tmp_path, "model: ./missing-dir\ntraining: {effective_batch: 8}\n")
    (ns,) = _resolved(path)
    assert ns.model == str(tmp_path / "missing-dir")


def test_a_models_devices_and_gpus_replace_the_top_level(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        f"""
        models:
          - {{name: a, model: {MLP}}}
          - {{name: b, model: {MLP}, devices: [h100], gpus: 4}}
          - {{name: c, model: {MLP}, devices: rtx-4060}}
        training: {{effective_batch: 8}}
        devices: [a100-80gb, rtx-4060]
        gpus: 2
        """,
    )
    a, b, c = _resolved(path)
    assert (a.device, a.gpus) == (("a100-80gb", "rtx-4060"), 2)
    assert (b.device, b.gpus) == (("h100",), 4)
    assert (c.device, c.gpus) == (("rtx-4060",), 2)
    (typed, *_) = _resolved(path, "--device", "v100-16gb")
    assert typed.device == ("v100-16gb",)  # NB: the command line wins over the entry


def test_a_models_unknown_device_names_its_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        f"""
        model:
          model: {MLP}
          devices: [h10]
        training: {{effective_batch: 8}}
        """,
    )
    with pytest.raises(SpecFileError, match=r"spec.yaml:3: models\[0\].devices\[0\]: unknown"):
        _resolved(path)


def test_inference_without_an_effective_batch_is_serving_only(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        f"""
        model: {MLP}
        devices: [rtx-4060]
        inference: {{precision: [fp32], batch: [1, 4]}}
        """,
    )
    (ns,) = _resolved(path)
    assert ns.inference is True and ns.effective_batch is None
    assert ns.inference_precision == "fp32" and ns.infer_batch == (1, 4)
