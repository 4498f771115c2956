"""A figure's typed label: its provenance and what it rests on."""

from __future__ import annotations

import pickle

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
from trainfit.spec import LoraSpec

MLP = "trainfit.models.zoo:emotion_mlp"


def test_a_label_keeps_its_provenance_through_pickle() -> None:
    label = FigureLabel(Provenance.MODELLED, How.H100_CONSTANTS)
    again = pickle.loads(pickle.dumps(label))
    assert (again, again.provenance) == (label, Provenance.MODELLED)


def test_a_label_with_detail_takes_its_provenance_from_its_kind() -> None:
    assert LoraLabel(lora=LoraSpec(rank=4)).provenance is Provenance.TRACED
    assert WeightsLabel(precision=InferencePrecision.INT4).provenance is Provenance.MODELLED
    assert WeightsLabel(precision=InferencePrecision.BF16).provenance is Provenance.EXACT
    prefill = PrefillLabel(calibrated_here=True, calibration_device="GPU")
    assert prefill.provenance is Provenance.MODELLED
    bandwidth = BandwidthLabel(efficiency=0.9, calibration_device="GPU", calibration_date="d")
    assert bandwidth.provenance is Provenance.MEASURED


def test_every_figure_of_an_estimate_says_where_it_comes_from() -> None:
    import trainfit

    est = trainfit.estimate(model=MLP, batch=8, device="h100")
    kinds = {name: label.provenance for name, label in est.labels.items()}
    assert kinds == {
        "peak_allocated_bytes": Provenance.TRACED,
        "peak_reserved_bytes": Provenance.SIMULATED,
        "runtime_context": Provenance.MEASURED,
        "workspaces": Provenance.DEFAULT,
    }
    mac = trainfit.estimate(model=MLP, batch=8, device="m1-pro-16gb")
    # a floor from public MPS out-of-memory messages (never zero), not a measurement
    assert mac.labels["runtime_context"].provenance is Provenance.MODELLED
    assert mac.labels["peak_reserved_bytes"].provenance is Provenance.MODELLED
