"""`plan()`: settings per device from full estimates, verdicts, tiers and the ladder."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit import TrainSpec, estimate
from trainfit.cli.main import main
from trainfit.errors import SpecError, TrainfitError
from trainfit.hardware.catalog import get_device
from trainfit.plan.options import Verdict
from trainfit.plan.search import plan
from trainfit.plan.tiers import split
from trainfit.plan.words import changes_text, multi_gpu_text, note_text, rung_text
from trainfit.spec import Precision

MELODY = TrainSpec(model="trainfit.models.zoo:melody_transformer", seq_len=256)
RTX_4060 = get_device("rtx-4060").memory_bytes


@pytest.fixture(scope="module")
def melody_plan():
    return plan(MELODY, effective_batch=2048, devices=("rtx-4060", "h100", "cpu"), margin=0.1)


@pytest.mark.slow
def test_each_device_gets_a_verdict(melody_plan) -> None:
    verdicts = {d.device: d.verdict for d in melody_plan.devices}
    assert verdicts["h100"] is Verdict.COMFORTABLE  # 2048 samples fit in one micro-batch
    assert verdicts["rtx-4060"] is Verdict.WITH_CHANGES  # needs accumulation on 8 GB
    assert verdicts["cpu"] in (Verdict.COMFORTABLE, Verdict.WITH_CHANGES)


@pytest.mark.slow
def test_setting_holds_the_effective_batch_and_is_a_real_estimate(melody_plan) -> None:
    small = next(d for d in melody_plan.devices if d.device == "rtx-4060")
    s = small.setting
    assert s is not None and s.precision is Precision.BF16
    assert s.micro_batch * s.grad_accum == 2048 and s.grad_accum > 1
    assert any("accumulation" in change for change in changes_text(small))
    spec = dataclasses.replace(
        MELODY,
        batch=s.micro_batch,
        precision=s.precision,
        checkpointing=s.checkpointing,
        optimizer=s.optimizer,
        device="rtx-4060",
    )
    full = estimate(spec).device_memory_needed_bytes
    assert s.needed_bytes == full <= 0.9 * RTX_4060


@pytest.mark.slow
def test_tiers_grow_with_their_share(melody_plan) -> None:
    small = next(d for d in melody_plan.devices if d.device == "rtx-4060")
    micro = [t.micro_batch for t in small.tiers]
    assert [t.name for t in small.tiers] == ["conservative", "balanced", "aggressive"]
    assert micro == sorted(micro) and micro[0] >= 1
    assert all(t.needed_bytes <= t.share * RTX_4060 for t in small.tiers)


@pytest.mark.slow
def test_ladder_goes_down(melody_plan) -> None:
    rungs = melody_plan.ladder
    assert rung_text(rungs[0]).startswith("fp32") and rungs[-1].micro_batch == 1
    assert rungs[-1].needed_bytes < rungs[0].needed_bytes
    assert melody_plan.ladder_device == "rtx-4060"


def test_split_keeps_the_effective_batch() -> None:
    assert split(64, 6) == (4, 16)
    assert split(64, 100) == (64, 1)
    assert split(67, 10) == (10, 7)  # prime: rounds up to 70, said in the changes


def test_bad_requests() -> None:
    with pytest.raises(SpecError, match=r"effective batch must be a positive integer, got 0"):
        plan(MELODY, effective_batch=0, devices=("h100",))
    with pytest.raises(TrainfitError, match=r"h1000"):
        plan(MELODY, effective_batch=8, devices=("h1000",))


def test_model_without_blocks_skips_checkpointing(capsys: pytest.CaptureFixture[str]) -> None:
    # the MLP has no ModuleList to checkpoint: the ladder leaves that rung out
    mlp = TrainSpec(model="trainfit.models.zoo:emotion_mlp")
    result = plan(mlp, effective_batch=256, devices="h100")  # NB: one name, not its letters
    assert [d.device for d in result.devices] == ["h100"]
    assert not any("checkpointing" in rung_text(r) for r in result.ladder)
    assert result.devices[0].verdict is Verdict.COMFORTABLE


def test_cli_plan_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "trainfit.models.zoo:emotion_mlp", "--effective-batch", "256"]
    assert main([*args, "--device", "h100", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"verdict": "fits comfortably"' in out and '"effective_batch": 256' in out


def test_model_states_are_a_floor() -> None:
    from trainfit.memory.states import model_states, parameter_counts

    gpt2 = TrainSpec(model="gpt2")
    counts = parameter_counts(gpt2)
    assert counts == (124_439_808, 124_439_808)
    adamw = model_states(gpt2, counts)
    assert adamw.total() == 124_439_808 * (4 + 4 + 8)
    pure_sgd = model_states(dataclasses.replace(gpt2, precision="pure-bf16", optimizer="sgd"))
    assert pure_sgd.total() == 124_439_808 * (2 + 2)
    full = estimate(dataclasses.replace(gpt2, batch=1, seq_len=64))
    assert full.peak_allocated_bytes > adamw.total()


@pytest.mark.slow
def test_settings_whose_states_cannot_fit_are_not_traced(monkeypatch: pytest.MonkeyPatch) -> None:
    import trainfit.plan.traces as plan_module

    def no_trace(*args: object, **kwargs: object) -> None:
        raise AssertionError("traced a setting whose model states exceed the device")

    monkeypatch.setattr(plan_module, "scale_batch", no_trace)
    spec = TrainSpec(model="qwen2-7b", seq_len=512)
    result = plan(spec, effective_batch=8, devices=("t4",), ladder=False)
    only = result.devices[0]
    assert only.verdict is Verdict.NO
    assert "weights, gradients and optimizer state alone need at least" in note_text(only)


def test_forced_precision_the_device_lacks_is_an_error() -> None:
    with pytest.raises(SpecError, match=r"bf16 is not supported on t4 .*use fp16"):
        plan(MELODY, effective_batch=8, devices=("h100", "t4"), precision=Precision.BF16)


@pytest.mark.slow
def test_devices_share_traces_only_when_attention_traces_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import trainfit.plan.traces as plan_module

    calls: list[str] = []
    real = plan_module.scale_batch

    def counted(spec: TrainSpec, *args: object, **kwargs: object) -> object:
        calls.append(spec.device)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(plan_module, "scale_batch", counted)
    # no attention at all: Hopper and Ampere trace alike, one scaling serves both
    mlp = TrainSpec(model="trainfit.models.zoo:emotion_mlp")
    shared = plan(mlp, effective_batch=64, devices=("h100", "a100-80gb"), ladder=False)
    assert calls == ["h100"]
    alone = plan(mlp, effective_batch=64, devices=("a100-80gb",), ladder=False)
    assert shared.devices[1].setting == alone.devices[0].setting
    # attention with dropout: cuDNN's scratch on Hopper only, so each family is traced
    calls.clear()
    plan(MELODY, effective_batch=64, devices=("h100", "a100-80gb"), ladder=False)
    assert calls == ["h100", "a100-80gb"]


@pytest.mark.slow
def test_ladder_traced_in_a_worker_equals_the_one_traced_here(
    melody_plan, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainfit.plan.search as planning
    from trainfit.plan.worker import LadderWorker

    monkeypatch.setattr(planning, "WORKER_PARAMETERS", 0)
    calls: list[int] = []
    real_needed = LadderWorker.needed

    def counted(self: LadderWorker, index: int) -> int | None:
        found = real_needed(self, index)
        if found is not None:
            calls.append(index)
        return found

    monkeypatch.setattr(LadderWorker, "needed", counted)
    spread = plan(
        MELODY, effective_batch=2048, devices=("rtx-4060", "h100", "cpu"), margin=0.1, jobs=2
    )
    assert calls  # some rungs came from the worker
    assert spread.ladder == melody_plan.ladder
    assert spread.devices == melody_plan.devices


@pytest.mark.slow
def test_the_ladder_leaves_the_multi_gpu_plans_as_they_are(tmp_path, monkeypatch) -> None:
    """The multi-GPU searches run before the ladder (a worker's ladder steps are read done):
    they start from the devices' traces alone, so a plan without its ladder has the same
    multi-GPU plans, and the ladder is the one read after them."""
    import json

    import trainfit.plan.search as planning
    from tests.plan.test_worker import TINY_LLAMA
    from trainfit.plan.words import plan_dict

    order: list[str] = []
    for name in ("with_distributed", "ladder_rungs"):
        real = getattr(planning, name)

        def called(*args: object, _real=real, _name=name, **kwargs: object) -> object:
            order.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(planning, name, called)
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    tiny = TrainSpec(model=str(tmp_path), seq_len=16)
    devices = ("h100", "t4")
    laddered = plan(tiny, effective_batch=8, devices=devices, multi_gpu=True)
    assert order == ["with_distributed", "ladder_rungs"]
    alone = plan(tiny, effective_batch=8, devices=devices, multi_gpu=True, ladder=False)
    assert laddered.ladder and not alone.ladder
    assert all(d.distributed is not None for d in laddered.devices)
    assert plan_dict(laddered)["devices"] == plan_dict(alone)["devices"]


def test_jobs_must_be_positive() -> None:
    with pytest.raises(SpecError, match="jobs must be a positive integer, got 0"):
        plan(MELODY, effective_batch=8, devices=("h100",), jobs=0)


def test_a_plan_that_fails_turns_the_collector_on_again() -> None:
    import gc

    was = gc.isenabled()
    gc.enable()
    try:
        with pytest.raises(SpecError, match="jobs must be"):
            plan(MELODY, effective_batch=8, devices=("h100",), jobs=0)
        assert gc.isenabled()  # NB: `plan` pauses it (trace.collector) for its whole run
    finally:
        if not was:
            gc.disable()


@pytest.mark.slow
def test_the_cpu_is_planned_against_the_host_ram(melody_plan) -> None:
    from trainfit.hardware.host import total_ram_bytes

    cpu = next(d for d in melody_plan.devices if d.device == "cpu")
    assert cpu.setting is not None and cpu.setting.precision is Precision.FP32
    assert cpu.setting.micro_batch * cpu.setting.grad_accum == 2048
    ram = total_ram_bytes()
    assert ram and cpu.setting.needed_bytes <= 0.9 * ram
    at = dataclasses.replace(MELODY, batch=cpu.setting.micro_batch, precision="fp32", device="cpu")
    assert estimate(at).device_memory_needed_bytes == cpu.setting.needed_bytes
    assert "RAM" in note_text(cpu)
    assert [t.micro_batch for t in cpu.tiers] == sorted(t.micro_batch for t in cpu.tiers)


@pytest.mark.slow
def test_a_cpu_too_small_for_one_sample(tmp_path) -> None:
    import json

    from trainfit.hardware.catalog import using_catalogs

    path = tmp_path / "cat.json"
    path.write_text(json.dumps({"devices": {"cpu": {"memory_gb": 2}}}))
    spec = TrainSpec(model="gpt2-medium", seq_len=128)  # 355M parameters: ~5.7 GB of states
    with using_catalogs([path]):
        result = plan(spec, effective_batch=8, devices=("cpu",), ladder=False)
    (cpu,) = result.devices
    assert cpu.verdict is Verdict.NO
    assert "one sample needs" in note_text(cpu) and "catalog's" in note_text(cpu)


def _small_gpu_catalog(tmp_path) -> str:
    """A 3.5 GiB Hopper-like card, sold one to a machine and eight to a machine."""
    import json

    card = {
        "display": "Tiny card",
        "kind": "cuda",
        "architecture": "hopper",
        "runtime_profile": "modelled-from-hopper",
        "memory_gb": 3.5,
        "compute_capability": [9, 0],
    }
    box = {"provider": "aws", "gpu": "tiny-card", "region": "x"}
    data = {
        "devices": {"tiny-card": card},
        "instances": {
            "one-tiny": {**box, "gpu_count": 1, "on_demand_usd_per_hour": 1.0},
            "eight-tiny": {**box, "gpu_count": 8, "on_demand_usd_per_hour": 10.0},
            "eight-tiny-dear": {**box, "gpu_count": 8, "on_demand_usd_per_hour": 20.0},
        },
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.slow
def test_a_gpu_too_small_is_told_how_many_would_hold_the_job_sharded(tmp_path) -> None:
    from trainfit.hardware.catalog import using_catalogs
    from trainfit.memory.states import model_states

    spec = TrainSpec(model="gpt2-medium", seq_len=128)
    # NB: an effective batch of 64 lets the multi-GPU plan (which the verdict's count is
    # taken from) try up to 64 data-parallel GPUs
    with using_catalogs([_small_gpu_catalog(tmp_path)]):
        found = plan(spec, effective_batch=64, devices=("tiny-card",), ladder=False).devices[0]
    assert found.verdict is Verdict.NO and found.setting is None
    sharded = found.sharded
    assert sharded is not None
    assert found.distributed is not None and sharded.gpus == found.distributed.gpus
    budget = 0.9 * 3.5 * 2**30
    assert sharded.per_gpu_bytes <= budget
    # the requested optimizer (AdamW, not the ladder's 8-bit state), its states split N ways
    assert sharded.optimizer is spec.optimizer
    states = model_states(dataclasses.replace(spec, precision=sharded.precision)).total()
    assert states > budget
    # one GPU per machine is never offered for sharding; the cheaper 8-GPU machine is
    assert (sharded.instance, sharded.instances, sharded.usd_per_hour) == (
        "eight-tiny",
        -(-sharded.gpus // 8),
        10.0 * -(-sharded.gpus // 8),
    )
    assert f"it would fit {sharded.gpus} of these GPUs" in note_text(found)
    assert "(modelled)" in note_text(found)
    assert found.offloaded is not None and found.offloaded.gpu_bytes <= budget
    assert "with the model states in CPU memory" in note_text(found)


@pytest.mark.slow
def test_a_batchnorm_model_skips_the_one_sample_rung_of_the_ladder() -> None:
    """BatchNorm cannot train on one sample: the ladder's last rung is left out, not an error."""
    spec = TrainSpec(model="trainfit.models.zoo:redimnet_like")
    found = plan(spec, effective_batch=64, devices=("rtx-4060",))
    assert found.ladder and all(r.micro_batch > 1 for r in found.ladder)
    assert not any(rung_text(r).startswith("1 sample per step") for r in found.ladder)


@pytest.mark.slow
def test_a_model_that_cannot_checkpoint_and_does_not_fit_gets_a_verdict() -> None:
    spec = TrainSpec(model="tests.timing_models:wide_sequential", inputs=("input=B,16384:float32",))
    result = plan(spec, effective_batch=8, devices=("rtx-4060",), ladder=False)
    (device,) = result.devices
    assert device.verdict is Verdict.NO
    assert "no gradient checkpointing" in note_text(device)
    # NB: no blocks to shard by: FSDP2 gathers the whole model as one unit, and the multi-GPU
    # plan (which the verdict takes what would hold it from) finds no GPU count that holds it
    assert device.distributed is None and device.sharded is None
    assert multi_gpu_text(device.no_multi_gpu) in note_text(device)


def test_the_typed_facts_render_as_the_plan_words_them() -> None:
    from trainfit.plan.ladder import LADDER
    from trainfit.plan.options import Accumulation, Change, MpsAutocast, RoundedBatch, Rung
    from trainfit.plan.words import change_text

    rung = Rung(
        change=None,
        precision=Precision.FP32,
        micro_batch=32,
        grad_accum=1,
        needed_bytes=0,
        saved_bytes=0,
    )
    words = [
        rung_text(dataclasses.replace(rung, change=c, precision=Precision.BF16, micro_batch=8))
        for c in (None, *LADDER)
    ]
    assert words == [
        "fp32, 8 samples per step",
        "bf16 mixed precision",
        "8 samples per step with accumulation",
        "gradient checkpointing",
        "8-bit AdamW state",
        "1 sample per step with accumulation",
    ]
    assert [
        change_text(c)
        for c in (
            MpsAutocast(precision=Precision.FP16),
            Change.CHECKPOINTING,
            Accumulation(micro_batch=4, grad_accum=16),
            RoundedBatch(effective=70, asked=67),
        )
    ] == [
        "fp16 autocast (torch 2.5 or later; its GradScaler needs torch 2.8)",
        "gradient checkpointing",
        "micro-batch 4 x 16 accumulation steps",
        "effective batch 70 (not 67)",
    ]


def test_arguments_of_the_wrong_type_are_named() -> None:
    with pytest.raises(SpecError, match=r"plan takes a TrainSpec, got str"):
        plan("gpt2", 8, "h100")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"effective batch must be a positive integer, got '8'"):
        plan(MELODY, "8", "h100")  # type: ignore[arg-type]
