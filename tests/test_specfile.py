"""Plan spec files: `trainfit plan spec.yaml` is the command line's plan, every problem at once
with its line, and every `plan` option has a field."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

import trainfit
from trainfit.cli import plan as plan_command
from trainfit.cli import spec_file
from trainfit.cli.main import _parser, main
from trainfit.cli.plan import COMMAND_LINE_ONLY
from trainfit.errors import SpecFileError, UnknownNameError
from trainfit.specfile import (
    FIELDS,
    ClaimCompare,
    ClaimQuantity,
    ModelOptions,
    PlanOptions,
    load_plan_spec,
    parse_plan_spec,
    resolve_plan_file,
)
from trainfit.specfile.fields import CARRIED, field_for_dest
from trainfit.specfile.options import PYTHON_ONLY

MLP = "trainfit.models.zoo:emotion_mlp"
DOC = Path(__file__).resolve().parents[1] / "docs" / "spec-file.md"


def _write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _problems(text: str) -> list[str]:
    with pytest.raises(SpecFileError) as info:
        parse_plan_spec(textwrap.dedent(text).lstrip("\n"), "spec.yaml")
    return list(info.value.problems)


def _resolved(path: Path, *typed: str) -> list[PlanOptions]:
    return [m.options for m in _models(path, *typed)]


def _models(path: Path, *typed: str) -> tuple[ModelOptions, ...]:
    planfile = load_plan_spec(path)
    given = plan_command.typed_options(
        spec_file.typed_options(_parser, ["plan", str(path), *typed])
    )
    return resolve_plan_file(planfile, given)


def _command_line(*argv: str) -> PlanOptions:
    return plan_command.options_of(_parser().parse_args(["plan", *argv]))


FULL = f"""
title: "emotion MLP on an H100"
description: |
  A small classifier, sized for a quick plan.
model:
  name: mlp
  model: {MLP}
  multiplier: 2
data:
  samples: 1e5
  eval_fraction: 0.1
training:
  effective_batch: 64
  epochs: 2
  optimizer: sgd
  freeze: ["layers.0.*"]
devices: [h100, a100-80gb]
gpus: 2
margin: 0.2
jobs: 1
cost:
  kwh_price: 0.3
  years: 2
  hours_per_year: 500
  deadline: 100
  prices: {{aws-p5.48xlarge: 50.5}}
measured: {{step: 0.5, on: h100}}
outputs:
  json: true
claims:
  - what: "peak memory on the H100"
    quantity: memory_gib
    value: [1, 2]
    source: "the design doc, section 3"
"""
FULL_ARGV = [
    MLP,
    "--multiplier", "2",
    "--samples", "100000",
    "--eval-fraction", "0.1",
    "--effective-batch", "64",
    "--epochs", "2",
    "--optimizer", "sgd",
    "--freeze", "layers.0.*",
    "--device", "h100",
    "--device", "a100-80gb",
    "--gpus", "2",
    "--margin", "0.2",
    "--jobs", "1",
    "--kwh-price", "0.3",
    "--years", "2",
    "--hours-per-year", "500",
    "--deadline", "100",
    "--price", "aws-p5.48xlarge=50.5",
    "--measured-step", "0.5",
    "--measured-on", "h100",
    "--json",
]  # fmt: skip


@pytest.mark.slow
def test_full_file_is_the_command_line_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, FULL)
    assert main(["plan", str(path)]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main(["plan", *FULL_ARGV]) == 0
    from_argv = json.loads(capsys.readouterr().out)
    assert from_file == from_argv
    assert [d["device"] for d in from_file["devices"]] == ["h100", "a100-80gb"]
    assert from_file["effective_batch"] == 64


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


def test_public_loader(tmp_path: Path) -> None:
    planfile = trainfit.load_plan_spec(_write(tmp_path, FULL))
    assert isinstance(planfile, trainfit.PlanFile)
    assert [m.label for m in planfile.entries()] == ["mlp"]
    assert planfile.model is None
    assert planfile.lines["models[0].multiplier"] == 7
    assert planfile.lines["claims[0].value"] == 32


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


@pytest.mark.slow
def test_override_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, FULL)
    typed = ["--device", "rtx-4060", "--measured-on", "rtx-4060", "--effective-batch", "32"]
    assert main(["plan", str(path), *typed]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["device"] for d in out["devices"]] == ["rtx-4060"]
    assert out["effective_batch"] == 32


@pytest.mark.slow
def test_several_models_one_plan_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(
        tmp_path,
        f"""
        models:
          - {{name: small, model: "{MLP}"}}
          - name: large
            model: {MLP}
            effective_batch: 16
            training: {{optimizer: sgd}}
        training: {{effective_batch: 64}}
        devices: [h100]
        jobs: 1
        """,
    )
    small, large = _resolved(path)
    assert (small.effective_batch, small.optimizer) == (64, "adamw")
    assert (large.effective_batch, large.optimizer) == (16, "sgd")
    assert main(["plan", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["small", "large"]
    assert out["small"]["effective_batch"] == 64
    assert out["large"]["effective_batch"] == 16
    assert main(["plan", str(path)]) == 0
    text = capsys.readouterr().out
    assert text.index("model small") < text.index("model large")


def test_every_plan_option_has_a_field() -> None:
    parser = spec_file.plan_parser(_parser)
    missing = [
        action.option_strings[0] if action.option_strings else action.dest
        for action in parser._actions
        if action.dest not in ("help", *COMMAND_LINE_ONLY) and field_for_dest(action.dest) is None
    ]
    assert missing == []


def test_every_field_is_documented() -> None:
    doc = DOC.read_text(encoding="utf-8")
    missing = [f.path for f in FIELDS if f"`{f.path}`" not in doc]
    missing += [path for path in CARRIED if f"`{path}`" not in doc]
    assert missing == []
    options = [f.option for f in FIELDS if f.option != "MODEL" and f"`{f.option}`" not in doc]
    assert options == []


def test_documented_example_loads() -> None:
    """The doc's full example is a valid file (its fields for options other branches add are
    reported as missing options, not as bad fields)."""
    doc = DOC.read_text(encoding="utf-8")
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    planfile = parse_plan_spec(example, "example.yaml")
    assert len(planfile.entries()) == 2


# ---- problems: every one at once, each with its line ----


def test_unknown_field_suggests_the_close_name() -> None:
    assert _problems(
        """
        model: gpt2
        training:
          efective_batch: 8
        """
    ) == [
        "spec.yaml:3: unknown field 'efective_batch' in training (did you mean 'effective_batch'?)"
    ]


def test_wrong_type_names_the_path_and_line() -> None:
    assert _problems(
        """
        models:
          - gpt2
          - model: gpt2
            name: other
            seq: long
        """
    ) == ["spec.yaml:5: models[1].seq: expected a whole number, got 'long'"]


def test_no_model() -> None:
    assert _problems("training: {effective_batch: 8}\n") == [
        "spec.yaml: no model: add 'model:' or 'models:'"
    ]


def test_yaml_syntax_error_has_its_line() -> None:
    (problem,) = _problems(
        """
        model: gpt2
        training: {effective_batch: [8}
        """
    )
    assert problem.startswith("spec.yaml:2: YAML syntax error: ")


def test_every_problem_at_once_in_line_order() -> None:
    assert _problems(
        """
        title: [a, list]
        models:
          - model: gpt2
            seq: 12.5
          - {model: gpt2}
        training:
          effective_batch: many
          epochs: 1
          epochs: 2
          stages: [{freeze: [a]}]
        devices: [h100, {name: x}]
        margin: true
        claims:
          - {what: x, quantity: memory, value: [4, 2]}
        """
    ) == [
        "spec.yaml:1: title: expected a string, got a list",
        "spec.yaml:4: models[0].seq: expected a whole number, got 12.5",
        "spec.yaml:7: training.effective_batch: expected a whole number, got 'many'",
        "spec.yaml:9: duplicate field 'epochs' in training (first at line 8)",
        "spec.yaml:10: training.stages[0]: missing field 'epochs'",
        "spec.yaml:11: devices[1]: expected a string, got a mapping",
        "spec.yaml:12: margin: expected a number, got true",
        "spec.yaml:14: claims[0].quantity: expected one of memory_gib | micro_batch | gpus | "
        "step_seconds | hours | cost_usd | params_millions | tokens_per_second | latency_ms | "
        "decode_tokens_per_second | inference_memory_gib | max_micro_batch | fits | "
        "trainable_percent | component_gib | usable_gib | weights_gib | power_watts | "
        "electricity_usd | ownership_usd | price_usd | usd_per_hour | "
        "checkpointing_saves_percent | spot_saves_percent, got 'memory'",
    ]


def test_model_names_and_claims_are_checked() -> None:
    assert _problems(
        """
        models: [gpt2, gpt2]
        claims:
          - {what: a, quantity: hours, value: 3}
          - {what: b, quantity: hours, value: [4, 2], model: gpt3}
        """
    ) == [
        "spec.yaml:1: models[1]: name 'gpt2' is also models[0]'s; give each model its own 'name'",
        "spec.yaml:3: claims[0]: name its model (one of gpt2, gpt2)",
        "spec.yaml:4: claims[1].model: 'gpt3' is not a model of this file (models: gpt2, gpt2)",
        "spec.yaml:4: claims[1].value: a range is [low, high], got [4.0, 2.0]",
    ]


def test_unsafe_tag_is_refused_with_its_line(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    problems = _problems(
        f"""
        model: gpt2
        training:
          optimizer: !!python/object/apply:os.system ["touch {marker}"]
        """
    )
    assert problems == [
        "spec.yaml:3: training.optimizer: tag '!!python/object/apply:os.system' is not allowed: "
        "a spec file holds plain values (strings, numbers, lists, mappings)"
    ]
    assert not marker.exists()


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


def test_every_field_and_option_is_a_plan_option() -> None:
    names = {f.name for f in dataclasses.fields(PlanOptions)} - set(PYTHON_ONLY)
    assert [f.dest for f in FIELDS if f.dest not in names] == []
    parser = spec_file.plan_parser(_parser)
    dests = [a.dest for a in parser._actions if a.dest not in ("help", *COMMAND_LINE_ONLY)]
    assert sorted(dests) == sorted(names)


def test_the_command_lines_defaults_are_the_plan_options() -> None:
    assert _command_line("gpt2") == PlanOptions(model="gpt2")


def test_an_unknown_override_lists_the_options() -> None:
    planfile = parse_plan_spec("model: gpt2\ntraining: {effective_batch: 8}\n")
    with pytest.raises(UnknownNameError, match="unknown plan option 'sed'"):
        resolve_plan_file(planfile, {"sed": 128})


def test_no_effective_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, f"model: {MLP}\n")
    assert main(["plan", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"trainfit: error: {path}:1: models[0] ({MLP}): no effective batch: "
        "add training.effective_batch (or effective_batch in the model entry)\n"
    )


@pytest.mark.slow
def test_a_models_error_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "models:\n  - gpt2\n  - gpt3\ntraining: {effective_batch: 8}\n")
    assert len(_resolved(path)) == 2  # NB: a model's name is checked when it is planned
    assert main(["plan", str(path), "--json", "--device", "h100"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"trainfit: error: {path}:3: models[1] (gpt3): unknown model 'gpt3'")
    assert err.count("\n") == 1


def test_cli_prints_each_problem_on_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "model: gpt2\nseq: 5\ntraining: {epochs: x}\n")
    assert main(["plan", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"trainfit: error: {path}: 3 problems",
        f"  {path}:1: models[0] (gpt2): no effective batch: add training.effective_batch (or "
        "effective_batch in the model entry)",
        f"  {path}:2: 'seq' is a field of a model, not of the file's top level: write "
        "'model: {model: ..., seq: ...}', or give it in an item of 'models:'",
        f"  {path}:3: training.epochs: expected a number, got 'x'",
    ]


def test_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nope.yml"
    assert main(["plan", str(path)]) == 1
    assert capsys.readouterr().err == f"trainfit: error: {path}: spec file not found\n"


def test_plan_without_effective_batch_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", MLP]) == 1
    assert capsys.readouterr().err == (
        "trainfit: error: trainfit plan needs --effective-batch N (or --inference)\n"
    )


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


def test_yaml_merge_keys_share_settings() -> None:
    text = """
        models:
          - &base {name: a, model: gpt2, seq: 128}
          - <<: *base
            name: b
            seq: 256
          - <<: *base
            name: NAME
        training: {effective_batch: 8}
        """
    planfile = parse_plan_spec(textwrap.dedent(text.replace("NAME", "c")))
    assert [(m.label, m.model, m.seq) for m in planfile.entries()] == [
        ("a", "gpt2", 128),
        ("b", "gpt2", 256),
        ("c", "gpt2", 128),
    ]
    assert _problems(text.replace("NAME", "a")) == [
        "spec.yaml:7: models[2]: name 'a' is also models[0]'s; give each model its own 'name'"
    ]


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


def test_inference_claims_take_a_precision_and_batch() -> None:
    planfile = parse_plan_spec(
        f"""
model: {MLP}
training: {{effective_batch: 8}}
inference: {{precision: [fp16]}}
claims:
  - {{what: latency, quantity: latency_ms, value: [30, 50], precision: fp16, batch: 1}}
  - {{what: speed, quantity: decode_tokens_per_second, value: 20}}
  - {{what: memory, quantity: inference_memory_gib, value: 14}}
"""
    )
    latency, speed, memory = planfile.claims
    assert latency.quantity is ClaimQuantity.LATENCY_MS
    assert (latency.precision, latency.batch) == ("fp16", 1)
    assert speed.quantity is ClaimQuantity.DECODE_TOKENS_PER_SECOND
    assert memory.quantity is ClaimQuantity.INFERENCE_MEMORY_GIB


def test_a_comparison_claim_reads_its_other_figure_and_checks_its_models() -> None:
    planfile = parse_plan_spec(
        f"""
models: [{{name: a, model: {MLP}}}, {{name: b, model: {MLP}}}]
training: {{effective_batch: 8}}
claims:
  - what: faster
    models: [a, b]
    device: m4-pro-16gb
    quantity: hours
    value: [3, 5]
    setting: {{micro_batch: 4, grad_accum: 2, precision: fp32, compile: true}}
    versus: {{device: rtx-4060, setting: {{micro_batch: 8}}, compare: times}}
"""
    )
    (claim,) = planfile.claims
    assert claim.setting.compile is True and claim.versus.device == "rtx-4060"
    assert claim.versus.compare is ClaimCompare.TIMES
    assert claim.versus.setting.micro_batch == 8
    assert _problems(
        f"""
        models: [{{name: a, model: {MLP}}}]
        claims:
          - {{what: x, quantity: hours, value: 3, versus: {{model: c, compare: percent_less}}}}
        """
    ) == ["spec.yaml:3: claims[0].versus: 'c' is not a model of this file (models: a)"]


@pytest.mark.slow
def test_spec_file_with_training_and_inference_reports_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path,
        f"""
        models:
          - {{name: a, model: {MLP}}}
          - {{name: b, model: {MLP}, devices: [h100]}}
        data: {{samples: 1000}}
        training: {{effective_batch: 8}}
        devices: [rtx-4060]
        jobs: 1
        inference: {{precision: [fp32], batch: [1]}}
        outputs: {{report: rep}}
        claims:
          - {{what: latency b, model: b, device: h100, quantity: latency_ms, value: 1}}
        """,
    )
    assert main(["plan", str(path)]) == 0
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    a, b = data["models"]
    assert [r["device"] for r in a["inference"]] == ["rtx-4060"]
    assert [r["device"] for r in b["inference"]] == ["h100"]
    assert [d["device"] for d in b["stages"][0]["plan"]["devices"]] == ["h100"]
    (claim,) = data["claims"]
    assert claim["trainfit"] == b["inference"][0]["total_ms"]


def test_a_models_field_at_the_top_level_says_where_it_goes() -> None:
    assert _problems(
        """
        model: trainfit.models.zoo:emotion_mlp
        inputs: ["x=B,8:float32"]
        training: {effective_batch: 8}
        """
    ) == [
        "spec.yaml:2: 'inputs' is a field of a model, not of the file's top level: write "
        "'model: {model: ..., inputs: ...}', or give it in an item of 'models:'"
    ]
