"""An Estimate's typed notes in words (exact strings)."""

from __future__ import annotations

from trainfit.estimator.result import AppleMemory, NoHostRam, QloraModelled
from trainfit.hardware.units import GIB
from trainfit.report.estimate import data_check_text, estimate_note_text
from trainfit.trace.compat import UntestedTorch
from trainfit.trace.recorder import Answer, DataCheck


def test_each_note_of_an_estimate_in_words() -> None:
    torch = UntestedTorch(release=(2, 9), tested=((2, 11), (2, 13)))
    assert estimate_note_text(torch) == (
        "torch 2.9 is not among the releases trainfit is tested on (2.11, 2.13); the tracer "
        "uses torch internals that may have changed"
    )
    assert estimate_note_text(AppleMemory(working_set_bytes=int(10.7 * GIB))) == (
        "Apple GPU: modelled, not measured; the limit used is Metal's recommended working set "
        "(10.7 GiB); PyTorch refuses allocations past 1.7 times it, and macOS swaps before "
        "that; MPSGraph's own buffers are not counted"
    )
    assert estimate_note_text(QloraModelled()).startswith(
        "QLoRA is modelled, not measured: each Linear but the head holds 0.5 byte per weight"
    )
    assert estimate_note_text(NoHostRam()) == (
        "the host's RAM could not be detected: no fits verdict"
    )


def test_a_data_dependent_check_in_words() -> None:
    mask = DataCheck(op="all.default", module="transformer", answer=Answer.TRUE)
    assert data_check_text(mask) == (
        "a data-dependent check (all.default) in module 'transformer' was answered True, as for "
        "unpadded random inputs"
    )
    loss = DataCheck(op="", module="", answer=Answer.ONE_FLOAT)
    assert data_check_text(loss) == (
        "a data-dependent check (scalar) in the loss was answered 1.0, as for unpadded random "
        "inputs"
    )


def test_an_estimate_of_a_live_module_names_its_class_in_its_json() -> None:
    import json

    import torch

    from trainfit.estimator.step import estimate
    from trainfit.report.estimate import estimate_dict

    result = estimate(torch.nn.Linear(4, 2), sample=torch.randn(3, 4), device="rtx-4060")  # type: ignore[arg-type]
    out = estimate_dict(result)
    assert out["model"] == "Linear (live module): Linear"
    assert out["loss"] == (
        "the step of the live Linear: its forward on its sample's structure, then its loss"
    )
    assert (out["spec"]["model"], out["spec"]["step_fn"]) == ("Linear (live module)",) * 2
    assert "trainfit.models.live" not in json.dumps(out, default=str)
