"""A generation estimate's typed caveats in words (exact strings)."""

from __future__ import annotations

from trainfit.estimator.generation import AllLogits, QuantizedModelled
from trainfit.estimator.storage import InferencePrecision
from trainfit.report.inference import generation_note_text


def test_each_caveat_of_a_generation_estimate_in_words() -> None:
    assert generation_note_text(QuantizedModelled(precision=InferencePrecision.INT4)) == (
        "int4: modelled, not measured; activations and kernels are the bf16 trace's "
        "(dequantization buffers not counted)"
    )
    assert generation_note_text(QuantizedModelled(precision=InferencePrecision.INT8)).startswith(
        "int8: modelled, not measured;"
    )
    assert generation_note_text(AllLogits()) == (
        "the model's forward has no logits_to_keep: prefill computes every logit"
    )
