"""Why a serving combination is refused, in words (exact strings, and the same words as the
error the estimate raises for it); the inference rows from estimates, in a serving-only report."""

from __future__ import annotations

import pytest

from tests.report.document.wide import GIB
from trainfit.errors import SpecError
from trainfit.estimator.forward import (
    Failed,
    Fp32Generation,
    OffCuda,
    OffGpu,
    QuantizedForward,
    ServingRefusal,
    estimate_forward,
    unserved,
)
from trainfit.estimator.generation import estimate_inference
from trainfit.estimator.storage import InferencePrecision
from trainfit.hardware.catalog import DeviceKind, get_device
from trainfit.report.document import build_report, to_markdown, write_report
from trainfit.report.document.serving import inference_row, refusal_text, unserved_text
from trainfit.spec import TrainSpec

EMOTION = "trainfit.models.zoo:emotion_mlp"


def test_each_refusal_in_words() -> None:
    assert unserved_text(OffCuda(device="m2-16gb", kind=DeviceKind.MPS)) == (
        "inference is estimated for CUDA GPUs; 'm2-16gb' is of kind 'mps': choose a GPU such "
        "as h100 or rtx-4060"
    )
    assert unserved_text(Fp32Generation()).startswith("fp32 generation is not modelled (")
    assert unserved_text(QuantizedForward(precision=InferencePrecision.INT4)) == (
        "int4 weights are modelled for causal LMs only; a plain module's forward is estimated "
        "at fp32, or fp16 or bf16 autocast"
    )
    assert unserved_text(OffGpu(device="cpu", kind=DeviceKind.CPU)) == (
        "a forward is estimated for GPUs; 'cpu' is of kind 'cpu': choose a GPU such as "
        "rtx-4060 or m4-pro-16gb"
    )
    assert unserved_text(Failed(message="no int8 rate")) == "no int8 rate"


def test_a_refusal_row_joins_its_reasons() -> None:
    why = unserved(False, get_device("cpu"), "int8")
    assert why == (
        QuantizedForward(precision=InferencePrecision.INT8),
        OffGpu(device="cpu", kind=DeviceKind.CPU),
    )
    refused = ServingRefusal(model=EMOTION, device="cpu", precision="int8", batch=1, why=why)
    row = inference_row(refused)
    assert (row.kind, row.note) == ("refused", refusal_text(refused))
    assert row.note == "; ".join(unserved_text(w) for w in why)
    assert unserved(True, get_device("h100"), "bf16") == ()
    assert unserved(True, get_device("h100"), "fp32") == (Fp32Generation(),)
    assert unserved(True, get_device("cpu"), "fp32") == (
        OffCuda(device="cpu", kind=DeviceKind.CPU),
    )


@pytest.mark.parametrize(
    ("generative", "device", "precision"),
    [(True, "m2-16gb", "bf16"), (True, "h100", "fp32"), (False, "cpu", "int4")],
)
def test_a_refusal_reads_as_the_error_the_estimate_raises(
    generative: bool, device: str, precision: str
) -> None:
    why = unserved(generative, get_device(device), precision)
    with pytest.raises(SpecError) as raised:
        if generative:
            estimate_inference("gpt2", context=8, new_tokens=2, precision=precision, device=device)
        else:
            estimate_forward(TrainSpec(model=EMOTION), precision=precision, device=device)
    assert str(raised.value) == "; ".join(unserved_text(w) for w in why)


def test_rows_from_estimates_and_a_serving_only_report(tmp_path) -> None:
    from trainfit.estimator.forward import OffGpu, ServingRefusal, estimate_forward
    from trainfit.report.document import ServingOnly, inference_rows

    spec = TrainSpec(model="trainfit.models.zoo:emotion_mlp")
    forward = estimate_forward(spec, batch=2, precision="fp32", device="rtx-4060")
    refused = ServingRefusal(model=spec.model, device="cpu", precision="fp32", batch=2,
                             why=(OffGpu(device="cpu", kind=DeviceKind.CPU),))  # fmt: skip
    row, no = inference_rows([forward, refused])
    assert row.kind == "forward" and row.total_ms == pytest.approx(forward.seconds * 1e3, rel=1e-3)
    assert row.prefill_ms == row.total_ms and row.decode_tokens_per_second is None
    assert row.memory_gib == pytest.approx(forward.device_memory_needed_bytes / GIB, abs=1e-4)
    assert dict(row.labels)["latency"].startswith("modelled: forward only")
    assert (no.kind, no.memory_gib) == ("refused", None)
    assert no.note.startswith("a forward is estimated for GPUs; 'cpu' is of kind 'cpu'")
    claim = {"what": "latency", "device": "rtx-4060", "quantity": "latency_ms", "value": 40}
    report = build_report(
        [ServingOnly(model=spec.model, parameters=230_000)], inference=[(row, no)], claims=[claim]
    )
    md = to_markdown(report)
    assert "## Inference" in md or "# Inference" in md
    assert "| cpu | refused | fp32 | 2 |" in md
    assert report.models[0].stages == () and report.run is None
    assert report.claims[0].trainfit == row.total_ms
    write_report(report, tmp_path / "rep")
    assert (tmp_path / "rep" / "report.html").is_file()
