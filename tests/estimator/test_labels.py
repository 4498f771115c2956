"""A figure's label: its words (what JSON and reports print) and its typed provenance."""

from __future__ import annotations

import json
import pickle

from trainfit.provenance import FigureLabel, Provenance

MLP = "trainfit.models.zoo:emotion_mlp"


def test_a_label_prints_as_its_words_and_keeps_its_provenance_through_pickle() -> None:
    label = FigureLabel(Provenance.MODELLED, "modelled (H100 constants)")
    assert (
        json.dumps({"runtime_context": label}) == '{"runtime_context": "modelled (H100 constants)"}'
    )
    again = pickle.loads(pickle.dumps(label))
    assert (again, again.provenance) == ("modelled (H100 constants)", Provenance.MODELLED)


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
