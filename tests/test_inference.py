"""Inference estimates: KV cache bytes, weights per precision, the traced prefill, decode
time against bandwidth, the CLI, and one-line errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console

from trainfit.cli.main import main
from trainfit.errors import SpecError, TrainfitError, UnknownNameError
from trainfit.estimator.generation import InferenceEstimate, estimate_inference
from trainfit.estimator.labels import FigureLabel, How
from trainfit.estimator.storage import InferencePrecision, kv_cache_bytes
from trainfit.hardware.catalog import DeviceKind, get_device
from trainfit.models import zoo
from trainfit.plan.time_words import time_note_text
from trainfit.provenance import Provenance
from trainfit.report.inference import inference_dict, inference_renderable
from trainfit.report.labels import label_text
from trainfit.spec import TrainSpec

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A two-layer Llama-shaped causal LM with grouped KV heads (config only)."""
    where = tmp_path_factory.mktemp("tiny-llama")
    transformers.LlamaConfig(
        vocab_size=8000,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    ).save_pretrained(where)
    return str(where)


def test_kv_cache_bytes_of_llama_3_2_1b() -> None:
    """Llama-3.2-1B: 16 layers, 8 KV heads of 64 (config.json); 2 (K, V) x 16 x 8 x 64 x
    1000 positions x batch 2 x 2 bytes."""
    config = transformers.LlamaConfig(
        hidden_size=2048,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
    )
    assert kv_cache_bytes(config, tokens=1000, batch=2) == 2 * 16 * 8 * 64 * 1000 * 2 * 2
    assert kv_cache_bytes(config, tokens=1000, batch=2) == 65_536_000


def test_kv_cache_bytes_without_kv_heads_and_with_a_sliding_window() -> None:
    gpt2 = transformers.GPT2Config()  # 12 layers, 12 heads of 64, no GQA
    assert kv_cache_bytes(gpt2, tokens=100, batch=1) == 2 * 12 * 12 * 64 * 100 * 2
    mistral = transformers.MistralConfig(
        num_hidden_layers=4,
        num_key_value_heads=8,
        hidden_size=4096,
        num_attention_heads=32,
        sliding_window=4096,
    )
    # transformers' sliding layer keeps the last window - 1 positions
    assert kv_cache_bytes(mistral, tokens=10_000, batch=1) == 2 * 4 * 8 * 128 * 4095 * 2


def test_traced_cache_is_the_formula(tiny_lm: str) -> None:
    est = estimate_inference(tiny_lm, context=300, new_tokens=20, batch=3)
    config = transformers.AutoConfig.from_pretrained(tiny_lm)
    # generate() holds context + new_tokens - 1 positions after its last step
    assert est.memory.kv_cache == kv_cache_bytes(config, tokens=300 + 20 - 1, batch=3)


def test_weights_shrink_with_precision(tiny_lm: str) -> None:
    by = {
        p: estimate_inference(tiny_lm, context=64, new_tokens=8, precision=p).memory.weights
        for p in InferencePrecision
        if p is not InferencePrecision.FP32  # NB: a plain module's forward only
    }
    config = transformers.AutoConfig.from_pretrained(tiny_lm)
    model = transformers.AutoModelForCausalLM.from_config(config)
    elements = sum(t.numel() for t in (*model.parameters(), *model.buffers()))  # rotary too
    assert by[InferencePrecision.BF16] == by[InferencePrecision.FP16] == 2 * elements
    assert by[InferencePrecision.INT4] < by[InferencePrecision.INT8] < by[InferencePrecision.BF16]
    # the two 8000 x 256 embeddings (input and head) stay 16-bit; per layer the Linear weights
    # (q, o: 256x256; k, v: 64x256; gate, up, down: 512x256 each) are quantized
    linear = 2 * (2 * 256 * 256 + 2 * 64 * 256 + 3 * 512 * 256)
    rows = 2 * (256 + 256 + 64 + 64 + 512 + 512 + 256)  # output rows of those weights
    assert by[InferencePrecision.BF16] - by[InferencePrecision.INT8] == 2 * linear - (
        linear + 4 * rows
    )
    # int4: groups of 128 inputs per output row, a 16-bit scale and zero (4 bytes) each:
    # q, o 256 rows x 2 groups; k, v 64 x 2; gate, up 512 x 2; down 256 x 4 (512 inputs)
    groups = 2 * (2 * 256 * 2 + 2 * 64 * 2 + 2 * 512 * 2 + 256 * 4)
    assert by[InferencePrecision.INT4] == by[InferencePrecision.BF16] - 2 * linear + (
        linear // 2 + 4 * groups
    )


def test_prefill_peak_grows_with_context(tiny_lm: str) -> None:
    peaks = [
        estimate_inference(tiny_lm, context=c, new_tokens=2, batch=4) for c in (128, 512, 1024)
    ]
    assert all(e.peak_at == "prefill" for e in peaks)
    allocated = [e.peak_allocated_bytes for e in peaks]
    activations = [e.memory.activations for e in peaks]
    assert allocated[0] < allocated[1] < allocated[2]
    assert activations[0] < activations[1] < activations[2]
    # logits_to_keep=1: no (batch, context, vocab) logits; the activations stay far below
    # one such tensor in fp32
    assert activations[2] < 4 * 1024 * 8000 * 4


def test_decode_scales_with_bandwidth(tiny_lm: str) -> None:
    h100 = get_device("h100")
    bandwidth = h100.memory_bandwidth_gbs.value

    def slow(factor: float) -> object:
        return dataclasses.replace(
            h100,
            name=f"h100-slow{factor}",
            memory_bandwidth_gbs=dataclasses.replace(
                h100.memory_bandwidth_gbs, value=bandwidth / factor
            ),
        )

    base = estimate_inference(tiny_lm, context=512, new_tokens=64, batch=8, device=h100)
    half = estimate_inference(tiny_lm, context=512, new_tokens=64, batch=8, device=slow(2))
    # the bandwidth-bound figure is bytes / bandwidth: exactly twice as long
    assert half.bandwidth_bound_seconds_per_token == pytest.approx(
        2 * base.bandwidth_bound_seconds_per_token, rel=1e-9
    )
    # this tiny model is host-bound on an H100 (eager PyTorch): the host's issue time rules
    assert base.decode_seconds_per_token == pytest.approx(base.decode_host_seconds)
    # 1000 times less bandwidth makes it device-bound: halving the bandwidth again nearly
    # doubles the step (the per-kernel fixed costs do not scale: at most 10% of it here)
    slower = estimate_inference(tiny_lm, context=512, new_tokens=64, batch=8, device=slow(1000))
    slowest = estimate_inference(tiny_lm, context=512, new_tokens=64, batch=8, device=slow(2000))
    ratio = slowest.decode_seconds_per_token / slower.decode_seconds_per_token
    assert 1.8 < ratio <= 2.0
    assert slowest.tokens_per_second == pytest.approx(8 / slowest.decode_seconds_per_token)


def test_total_is_prefill_plus_decode_steps(tiny_lm: str) -> None:
    e = estimate_inference(tiny_lm, context=64, new_tokens=10, batch=2)
    assert e.total_seconds == pytest.approx(e.prefill_seconds + 9 * e.decode_seconds_per_token)
    data = inference_dict(e)
    assert data["memory"]["kv_cache"] == e.memory.kv_cache
    assert data["device_memory_needed_bytes"] == e.peak_reserved_bytes + e.memory.runtime_context
    assert data["fits"] is True


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (dict(precision="int3"), UnknownNameError, "unknown inference precision 'int3'"),
        (
            dict(model="bert-base-uncased"),
            SpecError,
            "inference is estimated for causal language models.*bert-base-uncased is masked-lm",
        ),
        (dict(device="cpu"), SpecError, "inference is estimated for CUDA GPUs; 'cpu'"),
        (dict(context=0), SpecError, "context must be a positive integer, got 0"),
        (
            dict(context=1000, new_tokens=100),
            SpecError,
            r"context 1000 \+ new tokens 100 - 1 = 1099 exceeds gpt2's maximum of 1024",
        ),
    ],
)
def test_errors(call: dict[str, object], error: type[Exception], message: str) -> None:
    args = dict(model="gpt2", context=16, new_tokens=4) | call
    model = args.pop("model")
    with pytest.raises(error, match=message):
        estimate_inference(model, **args)


def test_cli_plan_inference_json(tiny_lm: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "plan",
            tiny_lm,
            "--inference",
            "--context",
            "128",
            "--new-tokens",
            "16",
            "--inference-precision",
            "bf16,int4",
            "--infer-batch",
            "1",
            "--infer-batch",
            "4",
            "--device",
            "h100",
            "--device",
            "rtx-4060",
            "--json",
        ]
    )
    assert code == 0
    rows = json.loads(capsys.readouterr().out)["inference"]
    assert [(r["device"], r["precision"], r["batch"]) for r in rows] == [
        (d, p, b) for d in ("h100", "rtx-4060") for p in ("bf16", "int4") for b in (1, 4)
    ]
    for key in (
        "memory",
        "fits",
        "prefill_ms",
        "decode_ms_per_token",
        "tokens_per_second",
        "total_ms",
        "scheme",
        "labels",
    ):
        assert key in rows[0]
    assert rows[2]["memory"]["weights"] < rows[0]["memory"]["weights"]


def test_cli_plan_inference_table(tiny_lm: str) -> None:
    estimates = [
        estimate_inference(tiny_lm, context=64, new_tokens=8, precision=p) for p in ("bf16", "int8")
    ]
    console = Console(width=200, record=True)
    console.print(inference_renderable(estimates))
    text = console.export_text()
    assert "int8*" in text and "LLM.int8()-like" in text
    assert "context 64, 8 new tokens per sequence" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "gpt2", "--inference", "--new-tokens", "4"], "--inference needs --context N"),
        (
            [
                "plan",
                "gpt2",
                "--inference",
                "--context",
                "8",
                "--new-tokens",
                "4",
                "--inference-precision",
                "fp8",
            ],
            "unknown inference precision 'fp8'",
        ),
        (["plan", "gpt2"], "trainfit plan needs --effective-batch N"),
    ],
)
def test_cli_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message in err


@pytest.mark.slow
def test_docs_example_runs() -> None:
    text = (Path(__file__).parent.parent / "docs" / "inference.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/inference.md", "exec"), {})


def test_one_new_token_is_the_prefill_only(tiny_lm: str) -> None:
    one = estimate_inference(tiny_lm, context=100, new_tokens=1, batch=2)
    config = transformers.AutoConfig.from_pretrained(tiny_lm)
    assert one.memory.kv_cache == kv_cache_bytes(config, tokens=100, batch=2)
    assert one.total_seconds == one.prefill_seconds


# --- a plain module's forward, and serving per model (trainfit.forward) ---

EMOTION = "trainfit.models.zoo:emotion_mlp"


def test_forward_of_a_plain_module() -> None:
    from trainfit.estimator.forward import estimate_forward

    spec = TrainSpec(model=EMOTION)
    one = estimate_forward(spec, batch=1, precision="fp32", device="rtx-4060")
    many = estimate_forward(spec, batch=4096, precision="fp32", device="rtx-4060")
    weights = sum(p.numel() * 4 for p in zoo.emotion_mlp().parameters())
    # the fp32 weights are live, and a larger batch holds more activations and takes longer
    assert one.peak_allocated_bytes >= weights
    assert many.peak_allocated_bytes > one.peak_allocated_bytes
    assert many.seconds > one.seconds > 0
    assert one.fits and one.bound in ("host", "device", "bandwidth")
    assert one.labels["latency"] == FigureLabel(Provenance.MODELLED, How.FORWARD_LATENCY)
    assert label_text(one.labels["latency"]).startswith("modelled: forward only")
    # no activations are kept for a backward: less than the training step's peak
    from trainfit import estimate

    trained = estimate(dataclasses.replace(spec, batch=4096, device="rtx-4060"))
    assert many.peak_allocated_bytes < trained.peak_allocated_bytes


def test_forward_on_an_apple_gpu_and_its_refusals() -> None:
    from trainfit.estimator.forward import estimate_forward

    spec = TrainSpec(model=EMOTION)
    mac = estimate_forward(spec, batch=1, precision="fp16", device="m4-pro-16gb")
    assert mac.seconds > 0 and any("Apple GPU" in time_note_text(n) for n in mac.notes)
    with pytest.raises(SpecError, match="int4 weights are modelled for causal LMs only"):
        estimate_forward(spec, precision="int4", device="rtx-4060")
    with pytest.raises(SpecError, match="a forward is estimated for GPUs; 'cpu'"):
        estimate_forward(spec, device="cpu")


def test_fp32_generation_is_refused(tiny_lm: str) -> None:
    with pytest.raises(SpecError, match="fp32 generation is not modelled"):
        estimate_inference(tiny_lm, context=8, new_tokens=2, precision="fp32")


def test_serving_picks_generation_or_forward_and_says_why_not(tiny_lm: str) -> None:
    from trainfit.estimator.forward import (
        ForwardEstimate,
        OffCuda,
        QuantizedForward,
        ServingRefusal,
        estimate_serving,
    )

    lm = estimate_serving(
        TrainSpec(model=tiny_lm),
        devices=["rtx-4060", "m4-pro-16gb"],
        precisions=["bf16"],
        batches=[1],
        context=16,
        new_tokens=4,
    )
    assert isinstance(lm[0], InferenceEstimate)
    assert isinstance(lm[1], ServingRefusal)
    assert lm[1].why == (OffCuda(device="m4-pro-16gb", kind=DeviceKind.MPS),)
    plain = estimate_serving(
        TrainSpec(model=EMOTION), devices=["rtx-4060"], precisions=["fp32", "int8"], batches=[1]
    )
    assert isinstance(plain[0], ForwardEstimate)
    assert isinstance(plain[1], ServingRefusal)
    assert plain[1].why == (QuantizedForward(precision=InferencePrecision.INT8),)
    with pytest.raises(SpecError, match="give the inference context and new_tokens"):
        estimate_serving(
            TrainSpec(model=tiny_lm), devices=["h100"], precisions=["bf16"], batches=[1]
        )


@pytest.mark.slow
def test_serving_only_cli_writes_a_report(tiny_lm: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "rep"
    argv = ["plan", tiny_lm, "--inference", "--context", "16", "--new-tokens", "4",
            "--device", "rtx-4060", "--infer-batch", "2", "--report", str(out)]  # fmt: skip
    assert main(argv) == 0
    data = json.loads((out / "report.json").read_text())
    (row,) = data["models"][0]["inference"]
    assert (row["kind"], row["device"], row["batch"], row["new_tokens"]) == (
        "generate",
        "rtx-4060",
        2,
        4,
    )
    assert row["decode_tokens_per_second"] > 0 and data["models"][0]["stages"] == []


def test_a_device_row_without_the_rate_is_one_error(tiny_lm: str) -> None:
    """A Device row from Python that lacks the 16-bit rate: a TrainfitError naming it, not the
    timing model's internal RateMissing."""
    h100 = get_device("h100")
    lacking = dataclasses.replace(
        h100, tflops={k: v for k, v in h100.tflops.items() if k != "bf16"}
    )
    with pytest.raises(TrainfitError, match=r"no bf16 rate for h100 in the catalog"):
        estimate_inference(tiny_lm, context=16, new_tokens=2, precision="bf16", device=lacking)


def test_a_generation_trace_warns_of_no_deprecated_argument(tiny_lm: str) -> None:
    # NB: transformers 5.2x renamed past_key_values to cache: the trace passes the name the
    # installed release takes, so no FutureWarning reaches the user's terminal
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        found = estimate_inference(tiny_lm, context=16, new_tokens=4)
    assert found.memory.kv_cache > 0
