"""`estimate_inference` of a live transformers causal LM: a meta copy traced, the same figures
as its config's, named by its class; a model of the wrong type is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers
from torch import nn

from trainfit.errors import SpecError
from trainfit.estimator.generation import estimate_inference

TINY = {"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 512, "n_positions": 64}


def test_a_live_causal_lm_is_estimated_as_its_config(tmp_path: Path) -> None:
    config = transformers.GPT2Config(**TINY)
    config.save_pretrained(tmp_path)
    lm = transformers.GPT2LMHeadModel(config)
    live = estimate_inference(lm, context=16, new_tokens=8, batch=2, device="rtx-4060")
    named = estimate_inference(str(tmp_path), context=16, new_tokens=8, batch=2, device="rtx-4060")
    assert live.device_memory_needed_bytes == named.device_memory_needed_bytes
    assert live.decode_seconds_per_token == named.decode_seconds_per_token
    assert live.prefill_seconds == named.prefill_seconds
    assert live.model == "GPT2LMHeadModel (live module)"
    assert live.model_description.source == "GPT2LMHeadModel (live module)"
    assert next(lm.parameters()).device.type == "cpu" and lm.training  # NB: left as it was
    with pytest.raises(SpecError, match=r"exceeds GPT2LMHeadModel \(live module\)'s maximum of 64"):
        estimate_inference(lm, context=60, new_tokens=8, device="rtx-4060")


def test_a_model_that_does_not_generate_or_is_no_model_is_one_line() -> None:
    with pytest.raises(
        SpecError,
        match=r"^inference is estimated for causal language models \(generate\(\)\); Linear "
        r"\(live module\) is a plain module: choose a causal LM such as gpt2$",
    ):
        estimate_inference(nn.Linear(4, 2), context=8, new_tokens=8)
    with pytest.raises(
        SpecError,
        match=r"^estimate_inference: model must be a str or Module, got int: a catalog name, ",
    ):
        estimate_inference(3, context=8, new_tokens=8)  # type: ignore[arg-type]
