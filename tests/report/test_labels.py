"""A figure's typed label in words (exact strings)."""

from __future__ import annotations

from trainfit.estimator.labels import (
    BandwidthLabel,
    FigureLabel,
    How,
    LoraLabel,
    PrefillLabel,
    WeightsLabel,
)
from trainfit.estimator.storage import InferencePrecision
from trainfit.provenance import Provenance
from trainfit.report.labels import label_text, labels_text, scheme_text
from trainfit.spec import LoraSpec


def test_every_kind_of_label_has_words() -> None:
    assert all(label_text(FigureLabel(Provenance.MODELLED, how)) for how in How)
    assert label_text(FigureLabel(Provenance.MODELLED, How.H100_CONSTANTS)) == (
        "modelled (H100 constants)"
    )


def test_a_label_with_detail_in_words() -> None:
    lora = LoraLabel(lora=LoraSpec(rank=4, targets=("c_attn",)))
    assert label_text(lora) == "traced (peft's own modules: LoRA r=4 alpha=8 dropout=0 on c_attn)"
    assert label_text(WeightsLabel(precision=InferencePrecision.BF16)) == "exact (16-bit)"
    assert label_text(WeightsLabel(precision=InferencePrecision.FP32)) == (
        "fp32 weights (a plain module's forward only)"
    )
    assert label_text(WeightsLabel(precision=InferencePrecision.INT4)) == (
        scheme_text(InferencePrecision.INT4)
    )
    here = PrefillLabel(calibrated_here=True, calibration_device="GPU A")
    there = PrefillLabel(calibrated_here=False, calibration_device="GPU A")
    assert label_text(here) == "modelled (per-op roofline, calibrated on this GPU model)"
    assert label_text(there) == "modelled (per-op roofline, efficiencies of an GPU A)"
    bandwidth = BandwidthLabel(efficiency=0.9012, calibration_device="GPU A", calibration_date="d")
    assert labels_text({"bandwidth_efficiency": bandwidth}) == {
        "bandwidth_efficiency": "0.901 x datasheet bandwidth (timing/calibration.json, GPU A, d)"
    }


def test_each_storage_scheme_in_words() -> None:
    assert scheme_text(InferencePrecision.INT4) == (
        "modelled: GPTQ/AWQ-like int4 Linear weights, groups of 128 with 16-bit scale and zero; "
        "embeddings, norms and head 16-bit"
    )
    assert all(scheme_text(p) for p in InferencePrecision)
