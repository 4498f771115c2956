"""Checks on the data in the built-in model catalog (src/trainfit/models/catalog.json).

Every row must be well formed, and its config must build the named Hugging Face
architecture on the meta device with the published parameter count (within 0.5%).
Building on meta allocates no storage, so even the 32B row costs no memory.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import time
from pathlib import Path

import pytest

CATALOG_PATH = Path(__file__).resolve().parents[2] / "src" / "trainfit" / "models" / "catalog.json"

REQUIRED_KEYS = {
    "kind",
    "hub_id",
    "source",
    "source_seen",
    "family",
    "task",
    "aliases",
    "config",
    "params_expected",
    "params_note",
}
FAMILIES = {"decoder", "encoder", "encoder-decoder", "vision", "speech"}
TASKS = {"causal-lm", "masked-lm", "seq2seq-lm", "image-classification", "speech-seq2seq"}
# Keys that describe weights, tokenizers or tables rather than the architecture.
FORBIDDEN_CONFIG_KEYS = {"torch_dtype", "dtype", "architectures", "id2label", "label2id"}
TOLERANCE = 0.005

_build_seconds: dict[str, float] = {}


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"duplicate keys in catalog.json: {dupes}")
    return dict(pairs)


def _load_catalog() -> dict[str, dict]:
    text = CATALOG_PATH.read_text(encoding="utf-8")
    return json.loads(text, object_pairs_hook=_no_duplicate_keys)


CATALOG = _load_catalog()
NAMES = list(CATALOG)


@pytest.fixture(scope="module", autouse=True)
def _report_build_times():
    start = time.perf_counter()
    yield
    total = time.perf_counter() - start
    if _build_seconds:
        slowest = max(_build_seconds, key=_build_seconds.__getitem__)
        print(
            f"\ncatalog: built {len(_build_seconds)} models on meta in "
            f"{sum(_build_seconds.values()):.2f}s (module {total:.2f}s; "
            f"slowest {slowest} {_build_seconds[slowest]:.2f}s)"
        )


def test_catalog_has_required_entries():
    required = {
        "gpt2",
        "gpt2-medium",
        "bert-base-uncased",
        "t5-small",
        "qwen2-0.5b",
        "qwen2.5-7b",
        "qwen2.5-14b",
        "qwen2.5-32b",
        "llama-3.2-1b",
        "llama-3.1-8b",
        "mistral-7b",
        "vit-base-patch16-224",
        "whisper-small",
        "resnet-50",
        "tinyllama-1.1b",
    }
    assert required <= set(CATALOG), sorted(required - set(CATALOG))


def test_names_and_aliases_are_unambiguous():
    seen: dict[str, str] = {}
    for name, row in CATALOG.items():
        assert name == name.lower(), name
        for key in {name, row["hub_id"].lower(), *(a.lower() for a in row["aliases"])}:
            assert seen.setdefault(key, name) == name, f"{key!r} names both {seen[key]} and {name}"


@pytest.mark.parametrize("name", NAMES)
def test_row_is_well_formed(name: str):
    row = CATALOG[name]
    assert set(row) >= REQUIRED_KEYS, sorted(REQUIRED_KEYS - set(row))
    assert row["kind"] == "hf"
    assert row["source"].startswith("https://"), row["source"]
    assert row["hub_id"] in row["source"], (row["hub_id"], row["source"])
    dt.date.fromisoformat(row["source_seen"])
    assert row["family"] in FAMILIES, row["family"]
    assert row["task"] in TASKS, row["task"]
    assert isinstance(row["aliases"], list)
    assert all(isinstance(a, str) and a for a in row["aliases"])
    assert row["hub_id"] in row["aliases"]
    assert isinstance(row["params_expected"], int) and row["params_expected"] > 0
    assert isinstance(row["params_note"], str) and row["params_note"].strip()
    # the published config.json's torch_dtype (what from_pretrained loads), where it has one
    assert row.get("torch_dtype", "float32") in {"float32", "bfloat16", "float16"}

    config = row["config"]
    assert isinstance(config, dict) and isinstance(config.get("model_type"), str)
    assert not FORBIDDEN_CONFIG_KEYS & set(config), sorted(FORBIDDEN_CONFIG_KEYS & set(config))
    if row["task"] == "image-classification":
        assert isinstance(config.get("num_labels"), int), "classifier rows must set num_labels"


@pytest.mark.parametrize("name", NAMES)
def test_config_builds_published_parameter_count(name: str):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    auto_model = {
        "causal-lm": transformers.AutoModelForCausalLM,
        "masked-lm": transformers.AutoModelForMaskedLM,
        "seq2seq-lm": transformers.AutoModelForSeq2SeqLM,
        "image-classification": transformers.AutoModelForImageClassification,
        "speech-seq2seq": transformers.AutoModelForSpeechSeq2Seq,
    }
    row = CATALOG[name]
    # AutoConfig edits nested dicts it is given (rope_scaling gains rope_theta), so pass a copy.
    config_dict = copy.deepcopy(row["config"])

    start = time.perf_counter()
    config = transformers.AutoConfig.for_model(**config_dict)
    with torch.device("meta"):
        model = auto_model[row["task"]].from_config(config)
    _build_seconds[name] = time.perf_counter() - start

    assert row["config"] == _load_catalog()[name]["config"], "catalog row was edited in place"
    assert config.model_type == row["config"]["model_type"]
    params = list(model.parameters())
    assert all(p.device.type == "meta" for p in params)
    built = sum(p.numel() for p in params)
    expected = row["params_expected"]
    print(f"{name}: {type(model).__name__} built {built:,} vs expected {expected:,}")
    assert abs(built - expected) <= TOLERANCE * expected, (
        f"{name}: built {built:,} parameters, expected {expected:,} "
        f"({(built - expected) / expected:+.3%}; tolerance {TOLERANCE:.1%})"
    )
