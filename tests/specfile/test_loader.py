"""`trainfit.specfile.loader`: the public loader, the documented example, every problem at once
with its line, YAML merge keys, and the claims read and checked."""

from __future__ import annotations

import textwrap
from pathlib import Path

import trainfit
from tests.specfile.plan_files import DOC, FULL, MLP, _problems, _write
from trainfit.specfile import ClaimCompare, ClaimQuantity, parse_plan_spec


def test_public_loader(tmp_path: Path) -> None:
    planfile = trainfit.load_plan_spec(_write(tmp_path, FULL))
    assert isinstance(planfile, trainfit.PlanFile)
    assert [m.label for m in planfile.entries()] == ["mlp"]
    assert planfile.model is None
    assert planfile.lines["models[0].multiplier"] == 7
    assert planfile.lines["claims[0].value"] == 32


def test_documented_example_loads() -> None:
    """The doc's full example is a valid file (its fields for options other branches add are
    reported as missing options, not as bad fields)."""
    doc = DOC.read_text(encoding="utf-8")
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    planfile = parse_plan_spec(example, "example.yaml")
    assert len(planfile.entries()) == 2


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
