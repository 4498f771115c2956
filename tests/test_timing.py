"""Step time and run cost: op costs, the roofline, run totals, costs, and bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import pytest
import torch

from trainfit.cli.main import main
from trainfit.errors import SpecError, TraceError
from trainfit.estimator.step import estimate
from trainfit.hardware.catalog import get_device
from trainfit.plan.cost_words import cost_line_dict
from trainfit.report.estimate import estimate_dict, estimate_notes
from trainfit.spec import TrainSpec
from trainfit.timing.constants import calibration
from trainfit.timing.missing import NoTime
from trainfit.timing.run import (
    NCCL_EFFICIENCY,
    CostLine,
    NoneInTime,
    NoSplit,
    OnlyUnpriced,
    RunSpec,
    Stage,
    cloud_costs,
    ddp_seconds,
    local_cost,
    recommend,
    run_time,
)
from trainfit.timing.step import TimeLabel, scaled, step_time
from trainfit.trace.costs import OpKind, op_cost
from trainfit.trace.step import trace_step
from trainfit.training import Phase

MLP = dict(model="tests.timing_models:two_layer_mlp", inputs=("input=B,64:float32",), loss=None)


def test_matmul_flops_are_counted_exactly() -> None:
    batch = 16
    trace = trace_step(TrainSpec(**MLP, batch=batch))
    costs = trace.costs
    forward = sum(op.flops for op in costs.ops(Phase.FORWARD) if op.kind is OpKind.MATMUL)
    backward = sum(op.flops for op in costs.ops(Phase.BACKWARD) if op.kind is OpKind.MATMUL)
    assert forward == 2 * batch * (64 * 128 + 128 * 10)
    # weight gradients of both layers, the input gradient of the second only
    assert backward == 2 * batch * (64 * 128 + 2 * 128 * 10)
    foreach = [op for op in costs.ops(Phase.OPTIMIZER) if op.kind is OpKind.FOREACH]
    assert foreach and all(op.bytes > 0 for op in foreach)


@pytest.mark.slow
def test_step_time_grows_with_batch_and_is_faster_on_a_faster_gpu() -> None:
    spec = TrainSpec(model="gpt2", batch=2, seq_len=256, precision="bf16")
    small = estimate(spec)
    # NB: at 2 and 8 samples the H100 waits for the host either way (same time); 64 is
    # bound by the device
    large = estimate(dataclasses.replace(spec, batch=64))
    slow = estimate(dataclasses.replace(spec, device="rtx-4060"))
    assert small.step_time is not None and large.step_time is not None
    assert large.step_time.seconds > small.step_time.seconds
    assert slow.step_time is not None and slow.step_time.seconds > 2 * small.step_time.seconds
    t = small.step_time
    assert t.label is TimeLabel.MODELLED
    assert t.tokens_per_second == pytest.approx(t.samples_per_second * 256)
    assert t.seconds >= t.forward_seconds + t.backward_seconds
    shares = t.compute_bound_share + t.memory_bound_share + t.host_bound_share
    assert shares == pytest.approx(1.0, abs=0.02)
    assert estimate_dict(small)["time"]["step_seconds"] == pytest.approx(t.seconds, rel=1e-4)


def test_accumulation_repeats_the_passes() -> None:
    spec = TrainSpec(**MLP, batch=32)
    trace = trace_step(spec)
    device = get_device("h100")
    one = step_time(trace.costs, spec, device, None, trace.trainable_tensors)
    four = step_time(
        trace.costs, dataclasses.replace(spec, grad_accum=4), device, None, trace.trainable_tensors
    )
    fixed = calibration().host_fit.step_seconds  # once per optimizer step, not per pass
    passes = one.seconds - one.optimizer_seconds - fixed
    assert four.seconds == pytest.approx(4 * passes + one.optimizer_seconds + fixed, rel=0.05)


def test_a_device_without_rates_says_so() -> None:
    result = estimate(model="gpt2", batch=2, seq_len=128, precision="bf16", device="m2-16gb")
    assert result.step_time is None
    assert result.step_time_missing is not None
    assert result.step_time_missing.why is NoTime.CATALOG_LACKS
    assert any("no bf16 compute rate" in n for n in estimate_notes(result))


@pytest.mark.slow
def test_a_measured_step_scales_to_another_device() -> None:
    spec = TrainSpec(model="gpt2", batch=4, seq_len=256, precision="bf16")
    trace = trace_step(spec)
    h100 = step_time(trace.costs, spec, get_device("h100"))
    a100 = step_time(trace.costs, spec, get_device("a100-80gb"))
    moved = scaled(a100, h100, 0.1, "h100")
    assert moved.label is TimeLabel.CALIBRATED
    assert moved.seconds == pytest.approx(0.1 * a100.seconds / h100.seconds)
    same = scaled(h100, h100, 0.1, "h100")
    assert same.label is TimeLabel.MEASURED and same.seconds == pytest.approx(0.1)


def _step(seconds: float = 2.0) -> object:
    spec = TrainSpec(**MLP, batch=8)
    trace = trace_step(spec)
    base = step_time(trace.costs, spec, get_device("h100"))
    return dataclasses.replace(
        base, seconds=seconds, forward_seconds=0.5, backward_seconds=1.0, optimizer_seconds=0.5
    )


def test_run_hours_from_steps_and_stages() -> None:
    step = _step()
    device = get_device("h100")
    run = RunSpec(samples=1000, epochs=2)
    hours = run_time([Stage(name="all", epochs=2, step=step)], 8, run, device, 10**6)
    assert hours.steps == 2 * 125
    assert hours.hours == pytest.approx(250 * 2.0 / 3600)
    # seed 002's shape: a frozen stage then a full one, each at its own step time
    frozen = dataclasses.replace(step, seconds=1.0)
    two = run_time(
        [Stage(name="frozen", epochs=1, step=frozen), Stage(name="all", epochs=1, step=step)],
        8,
        run,
        device,
        10**6,
    )
    assert two.hours == pytest.approx(125 * (1.0 + 2.0) / 3600)
    evaluated = run_time(
        [Stage(name="all", epochs=1, step=step)],
        8,
        dataclasses.replace(run, eval_fraction=0.5),
        device,
        10**6,
    )
    assert evaluated.hours == pytest.approx((125 * 2.0 + 500 * 0.5 / 8) / 3600)
    tokens = run_time(
        [Stage(name="all", epochs=1, step=step)],
        8,
        RunSpec(tokens=1024 * 1000),
        device,
        10**6,
        tokens_per_sample=1024,
    )
    assert tokens.steps == 125


def test_data_parallel_adds_the_all_reduce_and_bucket_copies() -> None:
    step = _step()
    device = get_device("h100")
    run = RunSpec(samples=1000, gpus=4)
    grads = 10**9
    four = run_time([Stage(name="all", epochs=1, step=step)], 8, run, device, grads)
    # ring: 2(N-1)/N of the bytes at NCCL's bus bandwidth over NVLink (450 GB/s one way)
    ring = 1.5 * grads / (450e9 * NCCL_EFFICIENCY)
    copies = 4 * grads / (3350e9 * calibration().memory_efficiency)
    assert four.communication_seconds == pytest.approx(ring + copies)
    assert four.communication_seconds == pytest.approx(ddp_seconds(device, 4, grads))
    # the stage's step is one GPU's over its share: DDP adds to it, nothing divides it
    assert four.step_seconds == pytest.approx(2.0 + ring + copies)
    # 1 GB of fp32 gradients over 4 H100s: about 6.6 ms of ring and 1.3 ms of copies
    assert four.communication_seconds == pytest.approx(0.0079, abs=0.0003)
    # more than 8 GPUs cross machines: the slower link
    sixteen = ddp_seconds(device, 16, grads)
    assert sixteen > ddp_seconds(device, 8, grads)
    with pytest.raises(SpecError, match="does not split over 3 GPUs"):
        run_time(
            [Stage(name="all", epochs=1, step=step)], 8, RunSpec(samples=10, gpus=3), device, 1
        )


def test_costs_local_and_cloud() -> None:
    h100 = get_device("h100")
    run = RunSpec(samples=10, kwh_price=0.2, years=3, hours_per_year=1000)
    local = local_cost(h100, 10.0, run)
    assert local.energy_kwh == pytest.approx(0.7 * 10)
    assert local.electricity == pytest.approx(0.7 * 10 * 0.2)
    assert local.amortisation == pytest.approx(h100.price.amount.value * 10 / 3000)
    lines = cloud_costs(h100, {1: 8.0}, run)
    lambda_one = next(c for c in lines if c.option == "lambda-1x-h100-sxm")
    assert lambda_one.hours == 8.0 and lambda_one.on_demand is not None
    eight = next(c for c in lines if c.option == "lambda-8x-h100-sxm")
    assert math.isnan(eight.hours) and eight.notes == (NoSplit(gpus=8),)
    assert cost_line_dict(eight)["hours"] is None
    eur = cloud_costs(h100, {1: 8.0}, RunSpec(samples=10, currency="EUR", usd_rate=0.9))
    assert next(c for c in eur if c.option == lambda_one.option).on_demand == pytest.approx(
        lambda_one.on_demand * 0.9
    )
    override = cloud_costs(
        h100, {1: 8.0}, RunSpec(samples=10, price_overrides={lambda_one.option: 1.0})
    )
    assert next(c for c in override if c.option == lambda_one.option).on_demand == 8.0


def test_recommendations_and_a_deadline_nobody_meets() -> None:
    lines = [
        CostLine(option="slow", kind="cloud", hours=10, on_demand=5.0),
        CostLine(option="fast", kind="cloud", hours=1, on_demand=20.0),
    ]
    rec = recommend(lines, deadline_hours=2)
    assert (rec.cheapest, rec.fastest, rec.cheapest_by_deadline) == ("slow", "fast", "fast")
    none = recommend(lines, deadline_hours=0.5)
    assert none.cheapest_by_deadline is None
    assert none.missed == NoneInTime(deadline_hours=0.5, closest="fast", hours=1.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(samples=-5), "samples must be a positive integer, got -5"),
        (dict(samples=0), "samples must be a positive integer, got 0"),
        (dict(samples=5, epochs=0), "epochs must be a positive number, got 0"),
        (dict(samples=5, currency="XYZ"), "unknown currency 'XYZ'"),
        (dict(samples=5, currency="EUR"), "currency EUR needs its rate to the US dollar"),
        (dict(samples=5, price_overrides={"aws-nope": 1.0}), "unknown instance 'aws-nope'"),
        (dict(samples=5, tokens=5), "give samples or tokens per epoch, not both"),
        (dict(samples=5, deadline_hours=-1), "deadline_hours must be a positive number"),
    ],
)
def test_bad_run_input(kwargs: dict, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        RunSpec(**kwargs)


def test_cli_time_and_cost(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "gpt2", "--batch", "4", "--seq", "256", "--precision", "bf16"]
    assert main([*args, "--time", "--samples", "10000", "--epochs", "2", "--deadline", "1"]) == 0
    out = capsys.readouterr().out
    assert "step time:" in out and "samples/s" in out
    assert re.search(r"run: [\d.,]+ h on 1 x", out)
    assert "cheapest: lambda" in out and "on-demand" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--samples", "-5"], "samples must be a positive integer, got -5"),
        (["--samples", "5", "--currency", "xyz"], "unknown currency 'XYZ'"),
        (["--samples", "5", "--price", "aws-g5.xlarge=cheap"], "expected INSTANCE=USD_PER_HOUR"),
    ],
)
def test_cli_bad_run_input_is_one_line(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", "gpt2", "--time", *extra]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("name", ["timing_h100", "timing_heldout_h100"])
def test_committed_step_time_table_is_current(name: str) -> None:
    """A committed H100 table (and its summary line, which the READMEs quote) is what the
    code predicts now, for every case."""
    import statistics

    import torch
    import transformers
    from benchmarks.timing.compare import predict

    root = Path(__file__).parent.parent / "benchmarks/timing/results"
    table = (root / f"{name}.md").read_text()
    versions = f"Predicted with torch {torch.__version__}, transformers {transformers.__version__}."
    if versions not in table:
        pytest.skip("the table was predicted with other torch/transformers versions")
    measured = json.loads((root / f"{name}.json").read_text())["cases"]
    rows = {
        line.split("|")[1].strip(): float(line.split("|")[3])
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith("| case")
    }
    device = get_device("h100")
    errors = []
    for case, record in measured.items():
        t = predict(case, device)
        assert t.seconds * 1000 == pytest.approx(rows[case], abs=0.051), case
        errors.append(abs(t.seconds / record["median_step_seconds"] - 1))
    summary = (
        f"median |error| {statistics.median(errors):.1%}, max {max(errors):.1%}; "
        f"within 15%: {sum(e <= 0.15 for e in errors)}, within 35%: "
        f"{sum(e <= 0.35 for e in errors)}"
    )
    assert summary in table


def test_device_syncs_are_told_from_host_counters() -> None:
    """Adafactor reads a device norm per parameter (a sync); AdamW's step counters are
    host tensors (none)."""
    adamw = trace_step(TrainSpec(**MLP, batch=4))
    adafactor = trace_step(TrainSpec(**MLP, batch=4, optimizer="adafactor"))

    def syncs(trace: object) -> int:
        return sum(1 for op in trace.costs.ops(Phase.OPTIMIZER) if op.kind is OpKind.SYNC)

    assert syncs(adamw) == 0
    assert syncs(adafactor) >= adafactor.trainable_tensors
    # the for-loop path PyTorch takes on CUDA: no foreach kernels
    assert not any(op.kind is OpKind.FOREACH for op in adafactor.costs.ops(Phase.OPTIMIZER))


def test_module_calls_and_batch_norm_channels_are_recorded() -> None:
    trace = trace_step(TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=8))
    forward = trace.costs.ops(Phase.FORWARD)
    assert sum(op.kind is OpKind.MODULE for op in forward) >= 4
    norms = [op for op in forward if op.kind is OpKind.NORM]
    assert norms and all(op.detail > 0 for op in norms)


def test_unaligned_matmul_is_flagged() -> None:
    trace = trace_step(TrainSpec(model="gpt2", batch=2, seq_len=64, precision="bf16"))
    matmuls = [op for op in trace.costs.ops(Phase.FORWARD) if op.kind is OpKind.MATMUL]
    # the 50257-token LM head, and nothing else
    assert sum(op.detail for op in matmuls) == 1


@pytest.mark.slow
def test_cli_stages_and_a_measured_step(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "trainfit.models.zoo:redimnet_like", "--batch", "16", "--precision"]
    args += ["bf16", "--device", "rtx-4060", "--time", "--samples", "1000", "--json"]
    assert main([*args, "--stage", "1:stem.*,stages.*", "--stage", "2"]) == 0
    staged = json.loads(capsys.readouterr().out)
    assert main([*args, "--epochs", "3"]) == 0
    plain = json.loads(capsys.readouterr().out)
    # the frozen stage is cheaper than a full one: 1 frozen + 2 full < 3 full
    assert staged["run"]["steps"] == plain["run"]["steps"] == 3 * 63
    assert staged["run"]["hours"] < plain["run"]["hours"]
    assert main([*args, "--measured-step", "0.05", "--measured-on", "h100"]) == 0
    calibrated = json.loads(capsys.readouterr().out)
    assert calibrated["time"]["label"] == "calibrated"
    assert "measured on NVIDIA H100" in calibrated["time"]["basis"]


def test_cli_bad_stage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "gpt2", "--time", "--samples", "5", "--stage", "x:foo"]) == 1
    err = capsys.readouterr().err
    assert "--stage 'x:foo': expected EPOCHS[:PATTERN,...]" in err and err.count("\n") == 1


@pytest.mark.slow
def test_plan_scales_every_device_by_a_measured_step() -> None:
    from trainfit.plan.search import plan

    spec = TrainSpec(**MLP, device="h100")
    modelled = plan(spec, 64, ("h100", "a100-80gb"), ladder=False)
    measured = plan(spec, 64, ("h100", "a100-80gb"), ladder=False, measured_step=(0.01, "h100"))
    h100, a100 = measured.devices
    assert h100.step_time.label is TimeLabel.MEASURED and h100.step_time.seconds == pytest.approx(
        0.01
    )
    assert a100.step_time.label is TimeLabel.CALIBRATED
    ratio = modelled.devices[1].step_time.seconds / modelled.devices[0].step_time.seconds
    assert a100.step_time.seconds == pytest.approx(0.01 * ratio)
    with pytest.raises(SpecError, match="no modelled step time on rtx-4060"):
        plan(spec, 64, ("h100",), ladder=False, measured_step=(0.01, "rtx-4060"))


def test_estimate_on_several_gpus_and_their_costs() -> None:
    from trainfit.timing.run import estimate_run

    result = estimate(model="gpt2", batch=8, seq_len=256, precision="bf16")
    one = estimate_run(result, RunSpec(samples=100_000))
    two = estimate_run(result, RunSpec(samples=100_000, gpus=2))
    # each GPU runs the whole step: twice the samples per step, half the steps, plus DDP
    assert two.time.steps == math.ceil(one.time.steps / 2)
    assert one.time.hours / 2 < two.time.hours < one.time.hours
    local_one, local_two = one.costs[0], two.costs[0]
    assert local_two.option == "local 2 x h100"
    assert local_two.energy_kwh == pytest.approx(2 * 0.7 * two.time.hours)
    assert local_two.amortisation == pytest.approx(
        2 * local_one.amortisation * two.time.hours / one.time.hours
    )


@pytest.mark.slow
def test_plan_run_times_each_gpu_count_with_its_own_step() -> None:
    from trainfit.plan.search import plan
    from trainfit.plan.words import plan_dict

    spec = TrainSpec(model="gpt2", seq_len=256, precision="bf16", device="h100")
    result = plan(spec, 32, ("h100",), ladder=False, run=RunSpec(samples=10_000, gpus=2))
    d = result.devices[0]
    by_gpus = dict(d.step_times)
    assert set(by_gpus) == {2, 4, 8, 16}
    # each GPU's share is smaller, so its step is shorter (not just divided)
    assert by_gpus[2].seconds < d.step_time.seconds
    assert by_gpus[16].micro_batch * by_gpus[16].grad_accum == 2
    assert d.run.gpus == 2 and d.costs[0].option == "local 2 x h100"
    clouds = {c.option: c for c in d.costs if c.kind == "cloud"}
    eight = clouds["lambda-8x-h100-sxm"]
    assert eight.hours < clouds["lambda-1x-h100-sxm"].hours
    data = plan_dict(result)["devices"][0]
    assert data["time"]["step_seconds"] == pytest.approx(d.step_time.seconds, rel=1e-4)
    assert set(data["time_by_gpus"]) == {"2", "4", "8", "16"}
    assert data["costs"][0]["total"] is not None


def test_a_deadline_only_an_unpriced_option_meets() -> None:
    lines = [
        CostLine(option="local m3-max", kind="local", hours=1, electricity=0.1),
        CostLine(option="slow", kind="cloud", hours=10, on_demand=5.0),
    ]
    rec = recommend(lines, deadline_hours=2)
    assert rec.cheapest_by_deadline is None
    assert rec.missed == OnlyUnpriced(deadline_hours=2, options=("local m3-max",))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--samples", "5", "--fx", "0.5"], "--fx) 0.5 given for USD"),
        (["--samples", "5", "--price", "lambda-1x-h100-sxm=nan"], "must be >= 0 USD/hour"),
        (["--measured-step", "nan"], "--measured-step must be a positive number of seconds"),
        (["--measured-on", "a100-80gb"], "--measured-on needs --measured-step SECONDS"),
        (["--deadline", "3"], "--deadline needs the data size: give --samples or --tokens"),
    ],
)
def test_more_bad_run_input(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", "gpt2", "--batch", "2", "--seq", "64", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_samples_alone_give_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "gpt2", "--batch", "2", "--seq", "64", "--samples", "1000", "--json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run"]["steps"] == 500 and data["time"]["label"] == "modelled"


@pytest.mark.slow
def test_stages_take_the_measured_scaling_and_their_own_gradients(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["estimate", "trainfit.models.zoo:redimnet_like", "--batch", "16", "--precision"]
    args += ["bf16", "--samples", "1000", "--json", "--stage", "1:stem.*,stages.*"]
    args += ["--stage", "1"]
    assert main(args) == 0
    modelled = json.loads(capsys.readouterr().out)["run"]
    assert main([*args, "--measured-step", "10"]) == 0
    measured = json.loads(capsys.readouterr().out)["run"]
    # a 10 s measured step makes both stages far longer than modelled, the frozen one too
    assert measured["hours"] > 50 * modelled["hours"]
    assert measured["label"] == "calibrated" or measured["label"] == "measured"


def test_estimate_on_two_gpus_prices_every_instance_size() -> None:
    from trainfit.timing.run import estimate_run

    result = estimate(model="gpt2", batch=4, seq_len=256, precision="bf16")
    run = estimate_run(result, RunSpec(samples=10_000, gpus=2))
    clouds = {c.option: c for c in run.costs if c.kind == "cloud"}
    one, eight = clouds["lambda-1x-h100-sxm"], clouds["lambda-8x-h100-sxm"]
    assert not math.isnan(one.hours) and not math.isnan(eight.hours)
    assert eight.hours < run.time.hours < one.hours


@pytest.mark.slow
def test_plan_counts_steps_with_the_batch_it_really_takes() -> None:
    from trainfit.plan.search import plan

    spec = TrainSpec(model="gpt2", seq_len=512, precision="bf16", device="rtx-4060")
    result = plan(spec, 34, ("rtx-4060",), ladder=False, run=RunSpec(samples=10_000))
    d = result.devices[0]
    taken = d.setting.micro_batch * d.setting.grad_accum
    assert taken != 34  # a prime-ish effective batch rounds up
    assert d.run.steps == math.ceil(10_000 / taken)
    with pytest.raises(SpecError, match="an effective batch of 34 does not split over 4 GPUs"):
        plan(spec, 34, ("rtx-4060",), ladder=False, run=RunSpec(samples=10_000, gpus=4))
    three = plan(
        TrainSpec(**MLP, device="h100"),
        36,
        ("h100",),
        ladder=False,
        run=RunSpec(samples=360, gpus=3),
    )
    assert 3 in dict(three.devices[0].step_times) and three.devices[0].run.gpus == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--samples", "5", "--epochs", "2", "--stage", "1"], "give --epochs or --stage, not both"),
        (["--samples", "5", "--stage", "inf"], "epochs must be positive and at most 1e+06"),
        (["--samples", "5", "--epochs", "1e308"], "epochs must be at most 1e+06"),
        (["--gpus", "2"], "--gpus needs the data size"),
        (["--samples", "5", "--currency", "chf", "--fx", "1.0", "--deadline", "0"], "deadline"),
    ],
)
def test_run_option_conflicts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", "gpt2", "--batch", "2", "--seq", "64", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_an_unknown_floating_dtype_is_an_error_naming_the_known_ones() -> None:
    x = torch.empty((4, 4), dtype=torch.float8_e4m3fn, device="meta")
    with pytest.raises(TraceError, match=r"dtype float8_e4m3fn: .*float32, bfloat16, float16"):
        op_cost(torch.ops.aten.mm.default, (x, x), {}, x)


def test_a_slow_loader_makes_the_run_input_bound() -> None:
    step = _step(2.0)  # micro-batch 8, 2 s a step
    device = get_device("h100")
    stages = [Stage(name="all", epochs=1, step=step)]
    plain = run_time(stages, 8, RunSpec(samples=800), device, 10**6)
    assert plain.input_seconds == 0 and plain.input_bound == 0
    fast = run_time(stages, 8, RunSpec(samples=800, data_rate=100.0), device, 10**6)
    assert fast.input_seconds == pytest.approx(0.08) and fast.input_bound == 0
    assert fast.hours == pytest.approx(plain.hours)  # loading hides under compute
    slow = run_time(stages, 8, RunSpec(samples=800, data_rate=1.0), device, 10**6)
    assert slow.input_seconds == pytest.approx(8.0) and slow.input_bound == pytest.approx(4.0)
    assert slow.hours == pytest.approx(100 * 8.0 / 3600)  # 100 steps at the loader's pace
    # over 2 GPUs each process loads its half of the batch with its own loader
    two = run_time(stages, 16, RunSpec(samples=800, data_rate=1.0, gpus=2), device, 10**6)
    assert two.input_seconds == pytest.approx(8.0)


def test_a_bad_data_rate_is_named() -> None:
    with pytest.raises(SpecError, match="data_rate must be a positive number"):
        RunSpec(samples=10, data_rate=0)


def test_a_step_that_does_not_fit_is_not_priced() -> None:
    from trainfit.timing.run import estimate_run

    result = estimate(
        model="trainfit.models.zoo:melody_transformer", batch=2048, seq_len=128, device="rtx-4060"
    )
    assert result.fits is False
    with pytest.raises(SpecError, match=r"does not fit rtx-4060, so its run is not priced"):
        estimate_run(result, RunSpec(samples=100_000))
