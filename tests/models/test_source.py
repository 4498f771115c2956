"""Model sources: catalog rows, local Hugging Face directories, hub ids and import paths."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainfit.errors import ModelLoadError, SpecError
from trainfit.models.catalog import catalog, find
from trainfit.models.source import build_program, hf_config
from trainfit.report.model import description_text
from trainfit.spec import TrainSpec


def test_catalog_aliases_resolve() -> None:
    assert find("openai-community/gpt2").name == "gpt2"
    assert find("GPT2").name == "gpt2"
    assert find("not-a-model") is None
    assert all(
        row.source.startswith("https://") or row.kind == "module" for row in catalog().values()
    )


def test_local_directory_config_only(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
    )
    config.save_pretrained(tmp_path)  # writes config.json only: no weights anywhere
    program = build_program(TrainSpec(model=str(tmp_path), batch=2, seq_len=16), "meta")
    assert "llama, causal LM" in description_text(program.description)
    batch = program.make_batch(torch.device("meta"), False)
    assert batch["input_ids"].shape == (2, 16)
    assert batch["labels"] is batch["input_ids"]


def test_a_config_value_of_the_wrong_type_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    fields = '"model_type": "gpt2", "n_layer": "twelve", "n_embd": 64, "n_head": 2'
    (tmp_path / "config.json").write_text("{" + fields + "}")
    with pytest.raises(ModelLoadError) as raised:
        build_program(TrainSpec(model=str(tmp_path), seq_len=16), "meta")
    text = str(raised.value)
    assert "\n" not in text
    assert "n_layer" in text and "'twelve'" in text
    assert text.startswith(
        (f"the transformers config of {str(tmp_path)!r} is invalid: ", str(tmp_path))
    )


@pytest.mark.slow
def test_unreachable_hub_id_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    import huggingface_hub.constants

    # NB: the hub reads HF_HUB_OFFLINE once, at import: setting the variable now would leave
    # the hub retrying the network for ~23 s
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        ModelLoadError, match=r"cannot load a transformers config from 'nobody/nothing'"
    ):
        build_program(TrainSpec(model="nobody/nothing"), "meta")


def test_import_path_with_declared_default_inputs() -> None:
    program = build_program(
        TrainSpec(model="trainfit.models.zoo:vq_patch_autoencoder", batch=2, multiplier=8), "meta"
    )
    assert program.make_batch(torch.device("meta"), False)["x"].shape == (16, 1, 64, 64)


def test_seq_len_goes_into_a_zoo_models_declared_sequence_dimension() -> None:
    spec = TrainSpec(model="trainfit.models.zoo:melody_transformer", batch=2, seq_len=512)
    batch = build_program(spec, "meta").make_batch(torch.device("meta"), False)
    assert tuple(batch["tokens"].shape) == (2, 512)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            dict(model="trainfit.models.zoo:emotion_mlp", seq_len=64),
            r"seq_len 64 does not apply to trainfit.models.zoo:emotion_mlp \(its inputs are "
            r"x=B,128\): give the shapes with --input",
        ),
        (
            dict(model="trainfit.models.zoo:melody_transformer", seq_len=2048),
            r"seq_len 2048 exceeds trainfit.models.zoo:melody_transformer's maximum of 1024",
        ),
        (
            dict(
                model="trainfit.models.zoo:melody_transformer",
                seq_len=128,
                inputs=("tokens=B,64:int64<388",),
            ),
            r"seq_len 128 and --input both given",
        ),
    ],
)
def test_seq_len_that_cannot_apply_is_an_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        build_program(TrainSpec(**kwargs), "meta")


def test_an_unreachable_hub_id_is_one_line_without_the_hubs_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import logging

    import transformers
    from huggingface_hub.utils import logging as hub_logging

    def offline(name: str, **kwargs: object) -> None:
        hub_logging.get_logger("huggingface_hub.utils._http").warning("Retrying in 1s [Retry 1/5].")
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    hub = logging.getLogger("huggingface_hub")
    level = hub.level
    hub.addHandler(handler)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", offline)
    try:
        with pytest.raises(ModelLoadError, match="couldn't connect"):
            build_program(TrainSpec(model="someorg/somemodel", seq_len=16), "meta")
    finally:
        hub.removeHandler(handler)
    assert records == []
    assert hub.level == level  # NB: the hub's own level is given back


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, r"holds no config\.json: give the folder a transformers model was saved to"),
        ("[1, 2, 3]", r"config\.json must hold a JSON object of the config's fields, got a list"),
    ],
)
def test_a_directory_without_a_config_object_says_so(
    tmp_path: Path, config: str | None, message: str
) -> None:
    if config is not None:
        (tmp_path / "config.json").write_text(config)
    with pytest.raises(ModelLoadError, match=message):
        build_program(TrainSpec(model=str(tmp_path), seq_len=16), "meta")


def test_a_transformers_model_is_built_with_the_layers_asked_for() -> None:
    spec = TrainSpec(model="qwen2-0.5b")
    assert hf_config(spec).num_hidden_layers == 24
    program = build_program(spec, "meta", layers=3)
    assert len(program.model.model.layers) == 3
    assert program.model.config.layer_types == ["full_attention"] * 3
    assert hf_config(TrainSpec(model="trainfit.models.zoo:emotion_mlp")) is None
