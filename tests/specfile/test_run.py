"""`run_plan` of a live `nn.Module`: planned as its import path would be, in this process, with
nothing kept on disk; its report and configs name its class, never its import path, and an
export whose training script would import it is refused."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from trainfit.errors import SpecError
from trainfit.export.write import write_exports
from trainfit.models.live import registered_names
from trainfit.models.zoo import emotion_mlp
from trainfit.plan import search
from trainfit.report.document.build import build_report
from trainfit.report.document.planned import plan_report
from trainfit.report.document.write import write_report
from trainfit.specfile.options import PlanOptions
from trainfit.specfile.run import run_plan
from trainfit.trace import store

MLP = "trainfit.models.zoo:emotion_mlp"
TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 256,
}


def test_a_live_module_is_planned_as_its_import_path_is() -> None:
    net = emotion_mlp()
    weight = next(net.parameters()).detach().clone()
    live = run_plan(
        PlanOptions(model=net, sample=torch.randn(4, 128), effective_batch=32, device="rtx-4060")
    )
    named = run_plan(
        PlanOptions(model=MLP, input=("x=B,128:float32",), effective_batch=32, device="rtx-4060")
    )
    assert live.plan is not None and named.plan is not None
    assert live.plan.devices[0].setting == named.plan.devices[0].setting
    assert live.plan.devices[0].max_micro_batch == named.plan.devices[0].max_micro_batch
    assert live.options.model is net  # NB: what was asked, as it was asked
    assert torch.equal(next(net.parameters()), weight) and net.training
    # the result keeps its model's import path resolvable, and only while it lives
    key = live.plan.spec.model.partition(":")[2]
    assert key in registered_names()
    del live
    gc.collect()
    assert key not in registered_names()


def test_a_live_plan_with_a_loss_keeps_no_trace_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(store.OFF, raising=False)
    monkeypatch.setenv(store.FOLDER, str(tmp_path / "traces"))
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    sample = (torch.randn(8, 16), torch.randint(0, 4, (8,)))
    options = PlanOptions(
        model=net, sample=sample, loss=nn.functional.cross_entropy, effective_batch=64,
        device=("rtx-4060", "cpu"),
    )  # fmt: skip
    result = run_plan(options)
    assert result.plan is not None and len(result.plan.devices) == 2
    assert not any((tmp_path / "traces").rglob("*"))
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    run_plan(PlanOptions(model=str(folder), seq=16, effective_batch=8, device="rtx-4060"))
    assert any((tmp_path / "traces").rglob("*"))  # NB: the store is on: a config's are kept


def test_a_live_module_s_ladder_is_traced_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoWorker:
        def __init__(self, *args: object) -> None:
            raise AssertionError("a worker was started")

    monkeypatch.setattr(search, "WORKER_PARAMETERS", 0)
    monkeypatch.setattr(search, "LadderWorker", NoWorker)
    monkeypatch.setattr(search, "worth_starting", lambda steps, device: True)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    options = PlanOptions(
        model=net, sample=torch.randn(4, 16), effective_batch=8, device="h100", jobs=2
    )
    result = run_plan(options)
    assert result.plan is not None and result.plan.ladder
    with pytest.raises(AssertionError, match="a worker was started"):  # NB: an import path's is
        run_plan(PlanOptions(model=MLP, effective_batch=8, device="h100", jobs=2))


def test_a_live_plan_s_report_and_configs_name_its_class_never_its_import_path(
    tmp_path: Path,
) -> None:
    net = nn.Linear(8, 2)
    result = run_plan(
        PlanOptions(
            model=net, sample=torch.randn(2, 8), effective_batch=4, device="rtx-4060",
            config_dir=str(tmp_path / "configs"), export=("hf", "yaml"),
            export_dir=str(tmp_path / "exported"),
        )
    )  # fmt: skip
    report = plan_report([result])
    assert report.models[0].name == "Linear"
    assert report.models[0].model == "Linear (live module)"
    assert report.to_dict()["models"][0]["stages"][0]["plan"]["model"] == "Linear (live module)"
    (verify,) = report.models[0].stages[0].verify
    assert verify.commands[0] == (
        "the estimate of this setting (net, batch: your module and its sample batch, with its "
        "loss= or step_fn= if any)",
        "trainfit.estimate(model=net, sample=batch, batch=4, precision='bf16', "
        "optimizer='adamw', device='rtx-4060')",
    )
    assert [c for _, c in verify.commands[1:]] == [
        "trainfit.measure.measure(model=net, sample=batch, batch=4, precision='bf16', "
        "optimizer='adamw', device='cuda')",
        "trainfit.find_max_batch(model=net, sample=batch, effective_batch=4, precision='bf16', "
        "optimizer='adamw', device='cuda')",
    ]
    written = write_report(report, tmp_path / "report")
    config = (tmp_path / "configs" / "config_rtx-4060.yaml").read_text()
    assert 'model:\n  name: "Linear (live module)"' in config
    assert "# re-check: trainfit.estimate(model=net, sample=batch, batch=4, " in config
    files = [*written, *(tmp_path / "configs").iterdir(), *(tmp_path / "exported").iterdir()]
    assert len(files) > 8
    for path in files:  # NB: no file names a path that resolves in this process only
        assert "trainfit.models.live" not in path.read_bytes().decode("utf-8", "replace"), path


def test_a_live_plan_s_training_script_export_is_one_line() -> None:
    result = run_plan(
        PlanOptions(model=nn.Linear(8, 2), sample=torch.randn(2, 8), effective_batch=4)
    )
    assert result.plan is not None
    refused = (
        r"^export 'torchrun' writes a training script that imports the model by its import "
        r"path, which a live Linear has not: give the model as pkg.module:factory to export "
        r"torchrun, or export one of hf, .* for your own training script$"
    )
    with pytest.raises(SpecError, match=refused):
        build_report([result.plan], exports=["torchrun"])
    with pytest.raises(SpecError, match=refused):
        write_exports(result.plan, ["torchrun"], "never-written")
    assert not Path("never-written").exists()
