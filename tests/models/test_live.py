"""A live model's registration: meta copies for the estimate, copies with the weights for a
real step (`weights=True`), and its import paths resolvable only while it lives."""

from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

from trainfit.errors import SpecError, UnknownNameError
from trainfit.estimator.step import estimate
from trainfit.models.imports import resolve
from trainfit.models.live import given_spec, is_live, registered, registration_of
from trainfit.spec import TrainSpec


@pytest.mark.parametrize("weights", [False, True])
def test_a_copy_with_weights_is_built_off_the_meta_device_only(weights: bool) -> None:
    net = nn.Linear(4, 2)
    with registered(net, torch.randn(3, 4), weights=weights) as live:
        factory = resolve(live.model_path, "model factory")
        with torch.device("meta"):
            assert factory().weight.device.type == "meta"
        with torch.device("cpu"):
            built = factory()
    assert built is not net
    if weights:
        assert torch.equal(built.weight, net.weight)
    else:
        assert built.weight.device.type == "meta"


def test_a_registration_is_found_by_its_path_while_it_lives() -> None:
    with registered(nn.Linear(4, 2), torch.randn(3, 4)) as live:
        assert is_live(live.model_path) and not is_live("pkg.module:fn")
        assert registration_of(live.model_path) is live.registration
        assert registration_of("pkg.module:model_1") is None
    path = live.model_path
    del live
    gc.collect()
    assert registration_of(path) is None


def test_given_spec_is_a_trainspec_or_its_fields() -> None:
    spec = TrainSpec(model="gpt2")
    with given_spec("f", spec, {}, None) as given:
        assert given is spec
    with given_spec("f", None, {"model": nn.Linear(4, 2)}, torch.randn(5, 4)) as given:
        assert is_live(given.model) and given.batch == 5
    wrong = r"^f: spec must be a TrainSpec, got str: give one, or its fields as keyword arguments"
    with pytest.raises(SpecError, match=wrong), given_spec("f", "gpt2", {}, None):  # type: ignore[arg-type]
        pass


def test_an_argument_that_is_no_trainspec_field_names_the_close_ones() -> None:
    wrong = (
        r"^unknown estimate argument 'devices'; did you mean 'device'\? "
        r"\(the fields of a TrainSpec: help\(trainfit.TrainSpec\)\)$"
    )
    with pytest.raises(UnknownNameError, match=wrong):
        estimate(model="gpt2", devices="rtx-4060")
