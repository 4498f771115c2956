"""Every committed GPU measurement against trainfit's estimate recomputed now, within a stated
tolerance per table.

The drift tests (test_accuracy_table.py, test_gpu_tables.py, ...) compare today's estimates with
the committed tables byte for byte, so a worse estimator passes them once its tables are
regenerated. These tests read only the measured side of each table, recompute the estimate on
this CPU with the harness of its `benchmarks/*/compare.py`, and fail when
|estimate / measured - 1| exceeds the table's tolerance: just above today's worst error, so that
a regression breaks it, and named beside the accuracy the table's README publishes.

Every case runs in the full suite; one case per table (the cheapest) is in the fast tier
(`-m "not slow"`). `test_a_five_percent_worse_estimator_fails` shows the check bites.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trainfit.estimator import step as estimator_step
from trainfit.spec import LoraSpec, TrainSpec

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
DEVICE = "h100"
"""The catalog row of the card every table was measured on (the multi-GPU ones plan for it)."""

TOLERANCE: dict[str, float] = {
    # device memory needed, 36 cases; published: median 0.1%, at most 2.9% (accuracy_h100.md);
    # today's worst: vq-ae-fp32 +2.92%
    "accuracy": 0.030,
    # device memory needed with peft's LoRA, 4 cases; published: worst -1.1% (lora_h100.md);
    # today's worst: qwen2-0.5b-r16-bf16 -1.05%
    "lora": 0.011,
    # greedy generation, device memory, 6 points; published: worst 0.8% (inference_h100.md);
    # today's worst: qwen2-0.5b b8 c1024 -0.82%
    "generation": 0.009,
    # DPO steps, device memory needed, 3 cases; published: worst 0.0% (preference_h100.md);
    # today's worst: qwen2-0.5b-dpo-precomputed +0.04%
    "dpo": 0.001,
    # `trainfit measure` steps, device memory needed, 12 cases; published: max 3.6%
    # (measure_h100.md); today's worst: vq-ae-fp32 +3.58%
    "measure": 0.037,
    # step time of the accuracy cases, 36 (the host floor was fitted on them; timed with a sync
    # after each step, compared with the model's synced step); published: median 6.8%, max
    # 50.5% (timing_h100.md, after the refit on the diagnose rows); since the convolution
    # channel curve and the fp16 batch-norm ratio (benchmarks/steptime/README.md), today's
    # worst: vq-ae-bf16-ckpt -40.0% (vq-ae-fp32 -36.3%, was -50.5%)
    "timing": 0.41,
    # step time of the held-out steps, 14; published: median 7.1%, max 26.2%
    # (timing_heldout_h100.md); since the convolution channel curve, today's worst:
    # whisper-small-fp32 +20.0% (redimnet-bf16-b128, -26.2% before, now within it)
    "timing-heldout": 0.21,
    # step time of the 12 steps of benchmarks/steptime/cases.py timed with a sync after each
    # step (heldout_h100_all.md: the median of four runs), against trainfit's figure, a loop's
    # steady period; published before the refit: median 17.4%, worst +72.9%; today: median
    # 16.6%, worst mlp-8x256-b32-sgd-fp32 +30.3% (the synced runs' spread: median 24%)
    "steptime-heldout": 0.31,
    # the same 12 steps timed as a loop runs them (calibration_window_h100.md; the host floor
    # was refitted on them): median 7.0%, worst mlp-8x256-b32-sgd-fp32 +25.5%; since the fp32
    # cuDNN bounds moved to the kernel study's (rnn_kernels.py, rnn_lengths.py), worst
    # rnn-tanh-h384-2l-b32-t200-fp32 +32.6% (was +25.0%: its backward, over hidden 256, now
    # runs the stepped kernels), while the 33 committed recurrent steps went from a median
    # 13.6% and worst 37.3% to 10.5% and 32.6% (benchmarks/steptime/README.md)
    "steptime-window": 0.33,
    # 12 blind steps, predicted (blind_predictions.json) before they ran, timed as a loop runs
    # them (blind_h100.md, 5-6 runs each); published: median 5.7%, worst
    # mlp-12x128-b16-sgdm-fp32 +32.1% (run-to-run spread median 28%); the refit after it
    # (diagnose rows, the optimizers' lines, the RNN call's wait) was chosen having seen them:
    # today median 6.1%, worst mlp-12x128-b16-sgdm-fp32 +20.7%
    "steptime-blind": 0.21,
    # 14 more blind steps, predicted (blind2_predictions.json, rules at 821965f) before they
    # ran, timed as a loop runs them (blind2_h100.md, 3 runs each, 2 for the DPO); published:
    # median 15.1%, worst gru-h192-2l-b32-t64-fp32 -39.4% (run-to-run spread median 26%)
    "steptime-blind2": 0.40,
    # 6 multi-layer RNN steps, predicted (blind3_predictions.json, rules at 937c19d) before they
    # ran, timed as a loop runs them (blind3_h100.md, 3 runs each, 2 for one); published:
    # median 10.4%, worst gru-h128-bi-2l-b64-t60-fp32 -27.9% (run-to-run spread median 20%)
    "steptime-blind3": 0.28,
    # 15 blind steps weighted to host-bound kinds (LoRA on a bf16 base, DPO, small and deep
    # MLPs, a small CNN with SGD, multi-layer GRU/LSTM, a classification head, gradient
    # accumulation) and 2 device-bound controls, predicted before they ran by the shipped rules
    # (blind4_previous_rules.json, rules at 973adc4) and by a candidate rule not shipped
    # (blind4_predictions.json, 1c8762d), timed as a loop runs them (blind4_h100.md, 5
    # fresh-process runs each, round-robin); published, shipped rules: median 8.3%, worst
    # gru-h256-2l-b16-t40-fp32 -33.5% (run-to-run spread median 29%)
    "steptime-blind4": 0.34,
    # 10 blind steps on the optimizer's paths (for-loop, fused, Adafactor's foreach, each beside
    # its twin on the default path: three MLPs and GPT-2), predicted (blind5_predictions.json,
    # rules at 3e24f80, the path-aware optimizer host cost) before they ran, timed as a loop
    # runs them (blind5_h100.md, 3 fresh-process runs each, round-robin); published: median
    # 12.6%, worst gpt2-b2-s64-adamw-forloop-bf16 -20.9% (run-to-run spread median 16%)
    "steptime-blind5": 0.21,
    # 13 blind steps (small and deep MLPs on Adam, SGD-momentum's for-loop, AdamW's fused path,
    # fp32 GRU/LSTM, a ResNet with plain SGD, LoRA, DPO, GPT-2 on the for-loop path, 2
    # device-bound controls), predicted before they ran by the shipped rules
    # (blind6_previous_rules.json) and by the GRU-backward rule (blind6_predictions.json, rules
    # at a4d3c03, shipped after), timed as a loop runs them (blind6_h100.md, 4 fresh-process
    # runs each, round-robin, 24 windows a run); published: median 19.1%, worst
    # mlp-14x96-b8-sgdm-forloop-fp32 +63.7% (run-to-run spread median 44%, worst 68%)
    "steptime-blind6": 0.64,
    # 13 blind steps (fp32 LSTM/GRU/RNN_TANH either side of the recurrent rule's bounds, a bf16
    # GRU, an MLP on AdamW, a ResNet on SGD-momentum, LoRA, DPO, a device-bound control),
    # predicted before they ran by the previous rules (blind7_previous_rules.json) and by the
    # recurrent rule (blind7_predictions.json, rules at 05b81f6), against the median over two
    # H100 machines of each one's median run (blind7_two_machines.md, 2 fresh-process runs
    # each); published: median 16.2%, worst lstm-h144-bi-1l-b16-t40-fp32 -31.1%
    "steptime-blind7": 0.32,
    # 15 blind steps, the five seed notes' own training jobs on an H100 (blind8_cases.py),
    # predicted before they ran (blind8_predictions.json, rules at 55245e6), timed as a loop
    # runs them (blind8_h100.md, 2 fresh-process runs each); published: median 12.3%, worst
    # redimnet-b64-frozen-fp16 -38.6%; the fp16 batch-norm rule and the convolution channel
    # curve were chosen having seen them: today median 6.1%, worst groove-b16-accum4-fp32 +34.5%
    "steptime-blind8": 0.35,
    # 7 batch-norm networks under fp16 autocast, predicted before they ran by the first fp16
    # batch-norm rule (blind9_predictions.json, rules at 90d2b15), timed as a loop runs them
    # (blind9_h100.md, 2 runs each); published: median 23.2%, worst vq-fp16-b32-x16 -55.2%;
    # the convolution channel curve was chosen having seen them: today median 14.9%, worst
    # vq-fp16-b32-x16 -31.8%
    "steptime-blind9": 0.32,
    # 8 convolutional networks with few channels and a ResNet-18 control, predicted before they
    # ran by the convolution channel curve (blind10_predictions.json, rules at 73fc475), timed
    # as a loop runs them (blind10_h100.md, 2 runs each, spread median 1.5%); published: median
    # 7.05%, worst tiny-cnn-fp32-b512 -26.7%
    "steptime-blind10": 0.27,
    # 12 everyday jobs (causal-LM fine-tunes, LoRA, DPO, BERT, ResNets, an MLP, an LSTM),
    # predicted before they ran with the fused-attention curves (blind11_predictions.json,
    # rules at bbff707), timed as a loop runs them (blind11_h100.md, 2 runs each, spread
    # median 3.3%); published: median 3.7%, worst resnet18-fp32-b128-64px-sgdm -23.5%
    "steptime-blind11": 0.24,
    # 10 attention-heavy steps (causal LMs at 1024-4096 tokens, BERT at 512, the MIDI and
    # melody decoders in fp32 and bf16), predicted before they ran with the corrected attention
    # curves and the key-length bound (blind12_predictions.json, rules at 824ecb1), timed as a
    # loop runs them (blind12_h100.md, 2 runs each); published: median 7.2%, worst
    # midi100m-b4-bf16 -23.4%
    "steptime-blind12": 0.24,
    # 12 everyday steps, most host-bound, predicted before they ran by the shipped model
    # (blind13_predictions.json, rules at 54229c8; a host-floor refit was tried and not
    # shipped), timed as a loop runs them (blind13_h100.md, 2 runs each, spread median 11.8%);
    # published: median 10.7%, worst vq-bf16-b16-x8 -25.1%
    "steptime-blind13": 0.26,
    # 12 everyday jobs (full and LoRA causal-LM fine-tunes up to Llama-3.2-3B, DPO, BERT-large,
    # ResNet-50 and ResNet-18, a wide MLP, an LSTM), predicted before they ran by the model
    # unchanged since the thirteenth set (blind14_predictions.json, rules at 9a27a67), timed as
    # a loop runs them (blind14_h100.md, 2 runs each, spread median 6.1%); published: median
    # 5.5%, worst qwen2-0.5b-b8-s256 +18.6%
    "steptime-blind14": 0.19,
    # largest micro-batch, 10 measured to the sample; published: 8 within 5%, worst +10.0%
    # (llama-3.2-1b-pure-bf16-s2048: 11 for 10) (max_batch_h100.md); a case measured only to a
    # bracket (resnet50-bf16) must be predicted inside it
    "max-batch": 0.101,
    # DDP/FSDP2 per-rank memory on two GPUs, 8 cases the model was revised on; published: median
    # -2.2%, worst -7.3% (multigpu_h100.md); today's worst: qwen2-0.5b-s1024-b2-ddp -7.31%
    "multigpu": 0.074,
    # the 6 held-out DDP/FSDP2 cases; published: median +0.2%, worst -2.5%
    # (multigpu_heldout_h100.md); today's worst: tinyllama-1.1b-s2048-b1-fsdp2 -2.47%
    "multigpu-heldout": 0.025,
    # the 9 held-out head, optimizer-path and cast steps (benchmarks/faithful), device memory
    # needed; published: median |error| 0.3%, worst -4.9% (heads_heldout_h100.md); today's
    # worst: distilbert-seqcls3-b16-s384-bf16 -4.91%
    "faithful-heads": 0.050,
}
"""|estimate / measured - 1| allowed per table: just above today's worst case."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    """One committed GPU measurement and how to recompute trainfit's answer for it."""

    table: str
    """The key of TOLERANCE."""
    name: str
    measured: float
    """Bytes, seconds or samples, as the table measured them."""
    predict: Callable[[], float]
    """Recomputes the estimate (same unit as `measured`)."""
    bracket: tuple[int, int] | None = None
    """Where the GPU search was cut short: the largest batch that ran and the smallest that
    did not; the prediction must lie in [fits, fails - 1]."""


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _tuples(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items() if v is not None}


def spec_of(recorded: dict[str, Any]) -> TrainSpec:
    """The TrainSpec of an estimate's recorded `spec` (Estimate.to_dict's)."""
    fields = _tuples(recorded)
    if "lora" in fields:
        fields["lora"] = LoraSpec(**_tuples(fields["lora"]))
        # NB: recorded before --weights-dtype existed: trainfit built (and measured) the LoRA
        # base in fp32 then
        fields.setdefault("weights_dtype", "fp32")
    return TrainSpec(**fields)


def _needed(spec: TrainSpec) -> Callable[[], float]:
    # NB: through the module, so that a test can swap the estimator
    return lambda: estimator_step.estimate(spec).device_memory_needed_bytes


def accuracy_cases() -> Iterator[Case]:
    from benchmarks.accuracy.cases import CASES

    measured = _json(BENCH / "accuracy/results/measured_h100.json")["cases"]
    for name, fields in CASES.items():
        if name in measured:
            yield Case(
                table="accuracy",
                name=name,
                measured=measured[name]["device_used_bytes"],
                predict=lambda fields=fields: _needed(TrainSpec(**fields))(),
            )


def _run_records(folder: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(folder.glob("*.json")):
        record = _json(path)
        if record.get("returncode") == 0 and record.get("result"):
            yield path.stem, record["result"]


def lora_cases() -> Iterator[Case]:
    for name, result in _run_records(BENCH / "lora/results/raw_h100/lora"):
        yield Case(
            table="lora",
            name=name,
            measured=result["measured"]["device_needed_bytes"],
            predict=lambda spec=result["estimate"]["spec"]: _needed(spec_of(spec))(),
        )


def measure_cases() -> Iterator[Case]:
    for name, result in _run_records(BENCH / "measure/results/raw/steps"):
        yield Case(
            table="measure",
            name=name,
            measured=result["measured"]["device_needed_bytes"],
            predict=lambda spec=result["estimate"]["spec"]: _needed(spec_of(spec))(),
        )


def _generation(model: str, point: dict[str, Any]) -> float:
    from trainfit.estimator.generation import estimate_inference

    return estimate_inference(
        model,
        context=point["context"],
        new_tokens=point["new_tokens"],
        batch=point["batch"],
        precision="bf16",
        device=DEVICE,
    ).device_memory_needed_bytes


def inference_cases() -> Iterator[Case]:
    from benchmarks.inference.run_gpu import DPO_CASES, GEN_MODELS

    raw = BENCH / "inference/results/raw_h100"
    for model in GEN_MODELS:
        data = _json(raw / f"gen_{model}.json")
        built = data.get("built_from", model)
        for point in data["points"]:
            if point["used"] is None:
                continue
            # NB: as benchmarks/inference/compare.py: the peak reserved plus what the GPU held
            # outside the allocator after the run (the CUDA context and libraries)
            outside = point["used"] - point["reserved"] - (point.get("other_processes") or 0)
            yield Case(
                table="generation",
                name=f"{model}-b{point['batch']}-c{point['context']}-n{point['new_tokens']}",
                measured=point["peak_reserved"] + outside,
                predict=lambda built=built, point=point: _generation(built, point),
            )
    for case in DPO_CASES:
        data = _json(raw / f"dpo_{case}.json")
        yield Case(
            table="dpo",
            name=case,
            measured=data["measured"]["device_needed_bytes"],
            predict=lambda fields=data["spec"]: _needed(TrainSpec(**fields, device=DEVICE))(),
        )


def _step_seconds(name: str) -> float:
    from benchmarks.timing.compare import predict

    from trainfit.hardware.catalog import get_device

    return predict(name, get_device(DEVICE)).seconds


def timing_cases() -> Iterator[Case]:
    for table, file in (
        ("timing", "timing_h100.json"),
        ("timing-heldout", "timing_heldout_h100.json"),
    ):
        for name, record in _json(BENCH / "timing/results" / file)["cases"].items():
            yield Case(
                table=table,
                name=name,
                measured=record["median_step_seconds"],
                predict=lambda name=name: _step_seconds(name),
            )


def _steptime_seconds(name: str) -> float:
    from benchmarks.steptime.predict import predict

    return predict(name)["step_seconds"]


def steptime_cases() -> Iterator[Case]:
    import statistics

    from benchmarks.steptime.compare import measured_runs

    record = _json(BENCH / "steptime/results/heldout_h100_all.json")
    for name, runs in measured_runs(record).items():
        yield Case(
            table="steptime-heldout",
            name=name,
            measured=statistics.median(runs),
            predict=lambda name=name: _steptime_seconds(name),
        )


def steptime_window_cases() -> Iterator[Case]:
    import statistics

    from benchmarks.steptime.compare_window import loop_runs

    record = _json(BENCH / "steptime/results/calibration_window_h100.json")
    for name, runs in loop_runs(record).items():
        yield Case(
            table="steptime-window",
            name=name,
            measured=statistics.median(runs),
            predict=lambda name=name: _steptime_seconds(name),
        )


def _steptime_blind_cases(blind_set: str, runs_file: str = "") -> Iterator[Case]:
    """A blind step-time set (`benchmarks.steptime.cases.case_set`): its loop-timed runs'
    median (`results/<set>_h100.json`, or `runs_file` under results/) against the prediction,
    table `steptime-<set>`."""
    import statistics

    from benchmarks.steptime.cases import case_set
    from benchmarks.steptime.compare_window import loop_runs
    from benchmarks.steptime.predict import predict

    cases = case_set(blind_set)
    record = _json(BENCH / "steptime/results" / (runs_file or f"{blind_set}_h100.json"))
    for name, runs in loop_runs(record).items():
        yield Case(
            table=f"steptime-{blind_set}",
            name=name,
            measured=statistics.median(runs),
            predict=lambda name=name: predict(name, cases)["step_seconds"],
        )


BLIND_SETS = {
    **{name: "" for name in ("blind", "blind2", "blind3", "blind4", "blind5", "blind6")},
    **{f"blind{n}": f"blind{n}_raw/machine1.json" for n in range(8, 15)},
}
"""The blind step-time sets read by `_steptime_blind_cases`: set -> its runs' file under
results/ ("": `<set>_h100.json`); the seventh, on two machines, has its own source."""


def steptime_blind_sets_cases() -> Iterator[Case]:
    for blind_set, runs_file in BLIND_SETS.items():
        yield from _steptime_blind_cases(blind_set, runs_file)


def steptime_blind7_cases() -> Iterator[Case]:
    """The seventh set, measured on two machines: each case's median over them of each one's
    median run (`benchmarks.steptime.machines.truths`)."""
    from benchmarks.steptime.cases import case_set
    from benchmarks.steptime.machines import truths
    from benchmarks.steptime.predict import predict

    cases = case_set("blind7")
    for name, measured in truths("blind7").items():
        yield Case(
            table="steptime-blind7",
            name=name,
            measured=measured,
            predict=lambda name=name: predict(name, cases)["step_seconds"],
        )


def _max_batch(name: str) -> float:
    from benchmarks.max_batch.predict import predict

    return predict(name)["predicted_max"]


def max_batch_cases() -> Iterator[Case]:
    for name, found in _json(BENCH / "max_batch/results/bisect_h100.json")["cases"].items():
        low, high = found.get("fits_at"), found.get("fails_at")
        real = found.get("real_max")
        if not real and not (low and high):
            continue
        yield Case(
            table="max-batch",
            name=name,
            measured=real or low,
            predict=lambda name=name: _max_batch(name),
            bracket=None if real else (low, high),
        )


def _per_rank(case: dict[str, object]) -> float:
    from benchmarks.sharded.multigpu import plan_case

    _, found = plan_case(case)
    assert found is not None, "the two-GPU plan no longer holds the case"
    return found.memory.total_bytes


def multigpu_cases() -> Iterator[Case]:
    from benchmarks.sharded.multigpu import CASES, HELDOUT

    results = BENCH / "sharded/results"
    for table, cases, raw in (
        ("multigpu", CASES, "multigpu_raw_h100"),
        ("multigpu-heldout", HELDOUT, "multigpu_heldout_raw_h100"),
    ):
        runs = _json(results / raw / "multigpu_measured.json")["runs"]
        for name, case in cases.items():
            ranks = runs.get(name, {}).get("ranks", [])
            if not ranks or any(r.get("error") for r in ranks):
                continue
            yield Case(
                table=table,
                name=name,
                measured=max(r["device_used_bytes"] for r in ranks),
                predict=lambda case=case: _per_rank(case),
            )


def faithful_heads_cases() -> Iterator[Case]:
    import tempfile

    from benchmarks.faithful.compare import _estimate, heads_heldout_spec
    from benchmarks.faithful.measure_gpu import HELDOUT_HEADS

    runs = _json(BENCH / "faithful/results/heads_heldout_h100.json")["runs"]

    def needed(name: str) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            figures = _estimate(heads_heldout_spec(name), Path(tmp))
        return float(figures["device_memory_needed_bytes"])

    for name in HELDOUT_HEADS:
        used = {r["device_used_bytes"] for r in runs if r["case"] == name and "error" not in r}
        if used:
            yield Case(
                table="faithful-heads",
                name=name,
                measured=max(used),
                predict=lambda name=name: needed(name),
            )


CASES: dict[str, Case] = {
    f"{c.table}/{c.name}": c
    for source in (
        accuracy_cases,
        lora_cases,
        inference_cases,
        measure_cases,
        timing_cases,
        steptime_cases,
        steptime_window_cases,
        steptime_blind_sets_cases,
        steptime_blind7_cases,
        max_batch_cases,
        multigpu_cases,
        faithful_heads_cases,
    )
    for c in source()
}

FAST = {
    "accuracy/emotion-mlp-fp32",
    "lora/gpt2-r8-fp32",
    "generation/gpt2-b1-c512-n64",
    "dpo/gpt2-dpo-model",
    "measure/vq-ae-fp32",
    "timing/emotion-mlp-fp32",
    "timing-heldout/melody-lstm-fp32-b128",
    "steptime-heldout/mlp-4x512-b64-adamw-fp32",
    "steptime-window/mlp-8x256-b32-sgd-fp32",
    "steptime-blind/mlp-12x128-b16-sgdm-fp32",
    "steptime-blind2/mlp-2x1024-b128-sgdm-bf16",
    "steptime-blind3/gru-h768-2l-b16-t48-bf16",
    "steptime-blind4/mlp-3x96-b4-sgd-fp32",
    "steptime-blind5/mlp-12x128-b16-adamw-forloop-fp32",
    "steptime-blind6/gru-h224-2l-b16-t48-fp32",
    "steptime-blind7/mlp-7x224-b16-adamw-fp32",
    "steptime-blind8/emotion-b64-fp16",
    "steptime-blind9/vq-fp16-b8-x16",
    "steptime-blind10/tiny-cnn-fp32-b512",
    "steptime-blind11/mlp-4x512-b256-sgd",
    "steptime-blind12/melody-b64-fp32",
    "steptime-blind13/emotion-b256-fp32",
    "steptime-blind14/mlp-3x2048-b512-adamw",
    "max-batch/melody-transformer-fp16-s1024",
    "multigpu/llama-3.2-1b-s2048-b1-ckpt-hybrid",
    "multigpu-heldout/gpt2-s1024-b8-ddp",
    "faithful-heads/distilbert-seqcls3-b16-s384-bf16",
}
"""One case per table in the fast tier (the cheapest to recompute)."""


def check(case: Case) -> float:
    """Recompute `case`; its error (estimate / measured - 1), asserted within tolerance."""
    predicted = case.predict()
    error = predicted / case.measured - 1
    if case.bracket is not None:
        fits, fails = case.bracket
        assert fits <= predicted < fails, (
            f"{case.table}/{case.name}: predicted {predicted}, outside the measured bracket "
            f"{fits}..{fails - 1}"
        )
        return error
    limit = TOLERANCE[case.table]
    assert abs(error) <= limit, (
        f"{case.table}/{case.name}: estimate {predicted:,.4g} vs measured {case.measured:,.4g} "
        f"is {error:+.1%}, beyond the table's tolerance of {limit:.1%}"
    )
    return error


def test_every_table_has_cases_and_a_fast_representative() -> None:
    tables = {c.table for c in CASES.values()}
    assert tables == set(TOLERANCE)
    assert set(CASES) >= FAST
    assert {CASES[key].table for key in FAST} == tables


@pytest.mark.parametrize(
    "key",
    [k if k in FAST else pytest.param(k, marks=pytest.mark.slow) for k in sorted(CASES)],
)
def test_estimate_is_within_the_tables_tolerance(key: str) -> None:
    check(CASES[key])


def test_a_five_percent_worse_estimator_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    case = CASES["accuracy/emotion-mlp-fp32"]
    check(case)
    real = estimator_step.estimate

    def worse(spec: TrainSpec) -> estimator_step.Estimate:
        result = real(spec)
        needed = round(result.device_memory_needed_bytes * 1.05)
        return dataclasses.replace(result, device_memory_needed_bytes=needed)

    monkeypatch.setattr(estimator_step, "estimate", worse)
    with pytest.raises(AssertionError, match=r"beyond the table's tolerance of 3\.0%"):
        check(case)
