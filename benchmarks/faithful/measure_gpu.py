"""Measure training steps built the way users' own code builds them, on a real CUDA GPU.

    PYTHONPATH=src:. python -m benchmarks.faithful.measure_gpu --out DIR [--cases a,b] [--repeat 2]
        [--case-list faithful|heldout-rnn|heldout-dtype|heldout-heads]

The accuracy suite (benchmarks/accuracy) builds every model the way trainfit traces it: fp32
weights on the CPU, `use_cache=False`, transformers' auto class for the catalog's task. Users'
code differs, and these cases measure how:
- weights in the dtype `from_pretrained` loads (the config's torch_dtype: bf16 for current LLMs),
  under a peft LoRA and as a DPO reference copy;
- transformers' own defaults (GPT-2's `use_cache=True` in train mode);
- every cuDNN RNN mode (GRU, RNN_TANH, RNN_RELU, bidirectional, multi-layer with dropout, LSTM
  with proj_size);
- the head the config's `architectures` names (DistilBERT sequence classification);
- `torch.optim.Adafactor` on a pure-bf16 GPT-2-large;
- host-bound steps (small MLP, SGD on a ResNet, LSTM) timed over many steps.

These were measured BEFORE trainfit models any of these behaviours: they are calibration data
for those rules, never held-out cases for them.

Each case runs in a fresh process: three steps for memory (peak allocated, peak reserved, device
memory in use from `mem_get_info`), then `--timed` more steps for time (the median of the steps
after the memory steps; the first steps, where a DPO reference copy or optimizer state is
made, are not timed). `--repeat` runs the whole case list again in new processes, for run-to-run
noise. Writes DIR/faithful.json (environment + one record per case and repeat).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (case name) -> keyword arguments of `_build`
CASES: dict[str, dict[str, Any]] = {
    "lora-qwen2-0.5b-bf16base": dict(hf="qwen2-0.5b", dtype="bf16", lora=16, batch=4, seq=1024),
    "lora-qwen2-0.5b-fp32base": dict(hf="qwen2-0.5b", dtype="fp32", lora=16, batch=4, seq=1024),
    "lora-llama-3.2-1b-bf16base-ckpt": dict(
        hf="llama-3.2-1b", dtype="bf16", lora=16, batch=4, seq=2048, ckpt=True
    ),
    "lora-tinyllama-bf16base": dict(hf="tinyllama-1.1b", dtype="bf16", lora=8, batch=4, seq=1024),
    "dpo-qwen2-0.5b-bf16ref": dict(hf="qwen2-0.5b", dtype="fp32", dpo="bf16", batch=2, seq=512),
    "dpo-qwen2-0.5b-fp32ref": dict(hf="qwen2-0.5b", dtype="fp32", dpo="fp32", batch=2, seq=512),
    "gpt2-default-cache-bf16": dict(hf="gpt2", dtype="fp32", cache=True, batch=8, seq=512),
    "gpt2-nocache-bf16": dict(hf="gpt2", dtype="fp32", cache=False, batch=8, seq=512),
    "distilbert-seqcls-bf16": dict(hf="distilbert-seqcls", dtype="fp32", batch=32, seq=256),
    "gpt2-large-adafactor-pure-bf16": dict(
        hf="gpt2-large", dtype="bf16", autocast=False, optim="adafactor", batch=4, seq=512
    ),
    "gru-lm-2l-drop-fp32": dict(rnn="GRU", layers=2, dropout=0.2, batch=64, seq=256, amp=False),
    "gru-lm-2l-drop-bf16": dict(rnn="GRU", layers=2, dropout=0.2, batch=64, seq=256, amp=True),
    "rnn-tanh-lm-2l-fp32": dict(rnn="RNN_TANH", layers=2, batch=64, seq=256, amp=False),
    "rnn-relu-lm-2l-fp32": dict(rnn="RNN_RELU", layers=2, batch=64, seq=256, amp=False),
    "lstm-bi-lm-2l-fp32": dict(rnn="LSTM", layers=2, bi=True, batch=64, seq=256, amp=False),
    "lstm-proj-lm-2l-fp32": dict(rnn="LSTM", layers=2, proj=128, batch=64, seq=256, amp=False),
    "gru-bi-lm-1l-bf16": dict(rnn="GRU", layers=1, bi=True, batch=32, seq=512, amp=True),
    "mlp-small-fp32": dict(zoo="emotion_mlp", batch=256, inputs={"x": (256, 128)}),
    "resnet50-sgd-fp32-b32": dict(zoo="resnet50", batch=32, optim="sgd", inputs={"x": None}),
}

# Held-out cases of the cuDNN RNN rules: trainfit's predictions for them were committed
# (results/rnn_heldout_predictions.json) before their first run. `factory` names the model in
# benchmarks.faithful.models; the tokens are (batch, seq) ids < VOCAB; `amp`: bf16 autocast.
HELDOUT_RNN: dict[str, dict[str, Any]] = {
    "gru-3l-drop-h384-b48-t300-fp32": dict(
        factory="heldout_gru_3l_drop", batch=48, seq=300, amp=False
    ),
    "rnn-relu-bi-2l-h768-b32-t384-bf16": dict(
        factory="heldout_rnn_relu_bi", batch=32, seq=384, amp=True
    ),
    "lstm-proj256-2l-h1024-b32-t200-fp32": dict(
        factory="heldout_lstm_proj256", batch=32, seq=200, amp=False
    ),
    "gru-char-h1024-b16-t1024-bf16": dict(factory="heldout_gru_char", batch=16, seq=1024, amp=True),
    "rnn-tanh-4l-drop-h256-b128-t128-fp32": dict(
        factory="heldout_rnn_tanh_4l_drop", batch=128, seq=128, amp=False
    ),
    "gru-bi-2l-drop-h320-b24-t500-bf16": dict(
        factory="heldout_gru_bi_2l_drop", batch=24, seq=500, amp=True
    ),
}

# Held-out cases of the weights-dtype and use_cache rules (`--weights-dtype auto`, a DPO
# `--reference-dtype`, a user's config keeping its use_cache): trainfit's predictions for them
# were committed (results/dtype_heldout_predictions.json) before their first run.
HELDOUT_DTYPE: dict[str, dict[str, Any]] = {
    "lora-r8-llama-3.2-1b-bf16base-b8-s1024": dict(
        hf="llama-3.2-1b", dtype="bf16", lora=8, batch=8, seq=1024
    ),
    "lora-r16-qwen2-1.5b-bf16base-ckpt-b4-s2048": dict(
        hf="qwen2-1.5b", dtype="bf16", lora=16, batch=4, seq=2048, ckpt=True
    ),
    "dpo-tinyllama-bf16ref-b2-s512": dict(
        hf="tinyllama-1.1b", dtype="fp32", dpo="bf16", batch=2, seq=512
    ),
    "gpt2-medium-default-cache-bf16-b8-s512": dict(
        hf="gpt2-medium", dtype="fp32", cache=True, batch=8, seq=512
    ),
}

# Held-out cases of the head, optimizer-path and cast rules (the class the config's
# `architectures` names, labels per head, `--optimizer-path fused`, Adafactor's states, a step
# function that casts a tied model): trainfit's predictions for them were committed
# (results/heads_heldout_predictions.json) before their first run. `head` names a config in
# benchmarks.faithful.heads; no attention mask is passed (trainfit's batch has none).
HELDOUT_HEADS: dict[str, dict[str, Any]] = {
    "distilbert-seqcls3-b16-s384-bf16": dict(head="distilbert-seqcls3", batch=16, seq=384),
    "bert-base-tokcls9-b16-s256-bf16": dict(head="bert-tokcls9", batch=16, seq=256),
    "roberta-base-qa-b12-s384-bf16": dict(head="roberta-qa", batch=12, seq=384),
    "bert-base-mc4-b8-s128-bf16": dict(head="bert-mc", batch=8, seq=128),
    "qwen2-0.5b-seqcls-b4-s512-bf16": dict(head="qwen2-seqcls", batch=4, seq=512),
    "gpt2-adafactor-pure-bf16-b8-s512": dict(
        hf="gpt2", dtype="bf16", autocast=False, optim="adafactor", batch=8, seq=512
    ),
    "gpt2-medium-adafactor-fp32-b4-s512": dict(
        hf="gpt2-medium", dtype="fp32", autocast=False, optim="adafactor", batch=4, seq=512
    ),
    "gpt2-medium-fused-adamw-bf16-b8-s512": dict(
        hf="gpt2-medium", dtype="fp32", optim="adamw-fused", batch=8, seq=512
    ),
    "gpt2-cast-bf16-step-tied-b8-s512": dict(
        hf="gpt2", dtype="fp32", autocast=False, cast=True, batch=8, seq=512
    ),
}

CASE_LISTS: dict[str, dict[str, dict[str, Any]]] = {
    "faithful": CASES,
    "heldout-rnn": HELDOUT_RNN,
    "heldout-dtype": HELDOUT_DTYPE,
    "heldout-heads": HELDOUT_HEADS,
}
"""The case lists `--case-list` picks from."""

DEV = os.environ.get("FAITHFUL_DEVICE", "cuda")
"""Where cases run: 'cuda', or 'cpu' for a smoke test of the harness (no figures kept)."""

VOCAB = 388  # benchmarks.faithful.models.VOCAB


def _environment() -> dict[str, Any]:
    import torch
    import transformers

    env: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": torch.cuda.get_device_name(0),
        "total_memory_bytes": torch.cuda.get_device_properties(0).total_memory,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
    }
    try:
        import peft

        env["peft"] = peft.__version__
    except ImportError:
        env["peft"] = None
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    env["nvidia_smi"] = smi.stdout.strip()
    return env


def _hf_model(name: str, dtype: Any, cache: bool | None) -> Any:
    import torch
    import transformers

    from trainfit.models.catalog import lookup

    if name == "distilbert-seqcls":
        config = transformers.DistilBertConfig(num_labels=2)
        config.architectures = ["DistilBertForSequenceClassification"]
        cls = transformers.DistilBertForSequenceClassification
    else:
        config = transformers.AutoConfig.for_model(**lookup(name).config)
        cls = transformers.AutoModelForCausalLM
    if cache is not None:
        config.use_cache = cache
    with torch.device(DEV):
        if name == "distilbert-seqcls":
            model = cls(config).to(dtype)
        else:
            model = cls.from_config(config, dtype=dtype)
    return model


def _rnn_lm(mode: str, layers: int, dropout: float, bi: bool, proj: int) -> Any:
    from benchmarks.faithful.models import RnnLM

    return RnnLM(mode, layers, dropout=dropout, bi=bi, proj=proj).to(DEV)


def _lora(model: Any, rank: int) -> Any:
    import peft

    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, task_type="CAUSAL_LM")
    return peft.get_peft_model(model, config)


def _dpo_loss(policy: Any, reference: Any, ids: Any, half: int) -> Any:
    import torch
    import torch.nn.functional as F

    def logps(model: Any) -> Any:
        logits = model(input_ids=ids).logits[:, :-1].float()
        chosen = torch.gather(logits.log_softmax(-1), 2, ids[:, 1:, None]).squeeze(2)
        return chosen.sum(-1)

    pol = logps(policy)
    with torch.no_grad():
        ref = logps(reference)
    margin = (pol[:half] - ref[:half]) - (pol[half:] - ref[half:])
    return -F.logsigmoid(0.1 * margin).mean()


def _build(case: dict[str, Any]) -> tuple[Any, Callable[[], Any], Any, bool]:
    """(model, loss function of no arguments, optimizer, autocast?) of a case."""
    import copy

    import torch

    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[case.get("dtype", "fp32")]
    autocast = case.get("autocast", True)
    if "rnn" in case or "factory" in case:
        if "factory" in case:
            from benchmarks.faithful import models

            model = getattr(models, case["factory"])().to(DEV)
        else:
            model = _rnn_lm(
                case["rnn"],
                case["layers"],
                case.get("dropout", 0.0),
                case.get("bi", False),
                case.get("proj", 0),
            )
        tokens = torch.randint(0, VOCAB, (case["batch"], case["seq"]), device=DEV)
        autocast = case["amp"]

        def loss() -> Any:
            return model(tokens)

    elif "head" in case:
        model, loss = _head_case(case)
    elif "zoo" in case:
        from trainfit.models import zoo

        model = getattr(zoo, case["zoo"])().to(DEV)
        if case["zoo"] == "resnet50":
            x = torch.randn(case["batch"], 3, 224, 224, device=DEV)
            y = torch.randint(0, 1000, (case["batch"],), device=DEV)

            def loss() -> Any:
                return torch.nn.functional.cross_entropy(model(x), y)

        else:
            x = torch.randn(case["batch"], 128, device=DEV)
            y = torch.randint(0, 7, (case["batch"],), device=DEV)

            def loss() -> Any:
                return torch.nn.functional.cross_entropy(model(x), y)

        autocast = False
    else:
        model = _hf_model(case["hf"], dtype, case.get("cache"))
        if case.get("ckpt"):
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        if case.get("lora"):
            model = _lora(model, case["lora"])
        vocab = model.config.vocab_size
        rows = case["batch"] * (2 if case.get("dpo") else 1)
        ids = torch.randint(0, vocab, (rows, case["seq"]), device=DEV)
        if case.get("dpo"):
            ref_dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[case["dpo"]]
            holder: dict[str, Any] = {}

            def loss() -> Any:
                if "ref" not in holder:  # the one-off copy a DPO trainer makes in its first step
                    holder["ref"] = copy.deepcopy(model).to(ref_dtype).eval().requires_grad_(False)
                return _dpo_loss(model, holder["ref"], ids, case["batch"])

        elif case.get("cast"):
            from benchmarks.faithful.heads import cast_bf16_step

            def loss() -> Any:
                return cast_bf16_step(model, {"input_ids": ids, "labels": ids})

        elif case["hf"] == "distilbert-seqcls":
            labels = torch.randint(0, 2, (case["batch"],), device=DEV)

            def loss() -> Any:
                return model(input_ids=ids, labels=labels).loss

        else:

            def loss() -> Any:
                return model(input_ids=ids, labels=ids).loss

    params = [p for p in model.parameters() if p.requires_grad]
    optim = case.get("optim", "adamw")
    if optim == "adafactor":
        optimizer = torch.optim.Adafactor(params, lr=1e-3)
    elif optim == "adamw-fused":
        optimizer = torch.optim.AdamW(params, lr=1e-5, fused=True)
    elif optim == "sgd":
        optimizer = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(params, lr=1e-5)
    model.train()
    return model, loss, optimizer, autocast


def _head_case(case: dict[str, Any]) -> tuple[Any, Callable[[], Any]]:
    """A head case: the model its config's architectures name, built with the head's auto
    class (fp32 weights), and its loss on random ids and labels shaped for the head."""
    import torch
    import transformers

    from benchmarks.faithful.heads import CHOICES, auto_class, head_config

    config = head_config(case["head"])
    architecture = config.architectures[0]
    with torch.device(DEV):
        model = getattr(transformers, auto_class(architecture)).from_config(config)
    rows, seq, vocab = case["batch"], case["seq"], config.vocab_size
    if architecture.endswith("MultipleChoice"):
        inputs = {
            "input_ids": torch.randint(0, vocab, (rows, CHOICES, seq), device=DEV),
            "labels": torch.randint(0, CHOICES, (rows,), device=DEV),
        }
    elif architecture.endswith("QuestionAnswering"):
        inputs = {
            "input_ids": torch.randint(0, vocab, (rows, seq), device=DEV),
            "start_positions": torch.randint(0, seq, (rows,), device=DEV),
            "end_positions": torch.randint(0, seq, (rows,), device=DEV),
        }
    else:
        shape = (rows, seq) if architecture.endswith("TokenClassification") else (rows,)
        inputs = {
            "input_ids": torch.randint(0, vocab, (rows, seq), device=DEV),
            "labels": torch.randint(0, config.num_labels, shape, device=DEV),
        }

    def loss() -> Any:
        return model(**inputs).loss

    return model, loss


def run_one(name: str, timed: int) -> dict[str, Any]:
    import torch

    case = {**CASES, **HELDOUT_RNN, **HELDOUT_DTYPE, **HELDOUT_HEADS}[name]
    free0, total = torch.cuda.mem_get_info()
    model, loss_fn, optimizer, autocast = _build(case)
    params = sum(p.numel() for p in model.parameters())
    weight_dtypes = sorted({str(p.dtype) for p in model.parameters()})
    steps: list[float] = []
    for i in range(3 + timed):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast(DEV, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        steps.append(time.perf_counter() - start)
        if i == 2:
            memory = {
                "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
                "device_used_bytes": total - torch.cuda.mem_get_info()[0],
            }
    return {
        "case": name,
        "spec": case,
        "baseline_used_bytes": total - free0,
        "parameters": params,
        "weight_dtypes": weight_dtypes,
        **memory,
        "step_seconds": steps,
        "median_timed_step_seconds": statistics.median(steps[3:]) if timed else None,
        "use_cache": getattr(getattr(model, "config", None), "use_cache", None),
        "model_class": type(model).__name__,
        "optimizer_state_bytes": sum(
            v.untyped_storage().nbytes()
            for s in optimizer.state.values()
            for v in s.values()
            if isinstance(v, torch.Tensor) and v.is_cuda
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", default="")
    parser.add_argument("--case-list", choices=sorted(CASE_LISTS), default="faithful")
    parser.add_argument("--timed", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, default=500.0)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.timed)))
        return
    started = time.perf_counter()
    names = [n for n in args.cases.split(",") if n] or list(CASE_LISTS[args.case_list])
    record: dict[str, Any] = {"environment": _environment(), "runs": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for repeat in range(args.repeat):
        for name in names:
            left = args.deadline - (time.perf_counter() - started)
            if left < 20:
                record["runs"].append({"case": name, "repeat": repeat, "error": "deadline"})
                continue
            cmd = [sys.executable, "-m", "benchmarks.faithful.measure_gpu", "--one", name]
            cmd += ["--timed", str(args.timed)]
            try:
                done = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=min(left, 150), env=os.environ
                )
                row = (
                    json.loads(done.stdout.strip().splitlines()[-1])
                    if done.returncode == 0
                    else {
                        "case": name,
                        "error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed",
                    }
                )
            except subprocess.TimeoutExpired:
                row = {"case": name, "error": "timeout"}
            row["repeat"] = repeat
            record["runs"].append(row)
            summary = row.get("error") or (
                f"{row['device_used_bytes'] / 2**30:.3f} GiB used, "
                f"{row['peak_allocated_bytes'] / 2**30:.3f} GiB peak alloc, "
                f"{(row['median_timed_step_seconds'] or 0) * 1000:.1f} ms"
            )
            print(f"[{repeat}] {name}: {summary}", flush=True)
            (args.out / "faithful.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
