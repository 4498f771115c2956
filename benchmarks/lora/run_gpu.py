"""Real peft LoRA steps on a GPU beside trainfit's estimate: `trainfit measure --lora ...`.

    PYTHONPATH=src:. python -m benchmarks.lora.run_gpu --out DIR            # one H100, ~3 min
    PYTHONPATH=src:. python -m benchmarks.lora.run_gpu --out DIR --tiny --device cpu   # check

Each case of `CASES` runs `trainfit measure CASE --lora R ... --json` in a fresh process (the
product's own path: `trainfit.measure.measure()` builds the model through `build_program`, which
wraps it with `peft.get_peft_model`, and the estimate for the matched catalog row sits beside
it). The QLoRA case cannot be measured (no bitsandbytes on the GPU machine): its estimate is
recorded with `trainfit estimate --qlora --json`, and the table says so.

Writes DIR/environment.json and DIR/lora/CASE.json; `benchmarks/lora/compare.py` makes the
table (benchmarks/lora/results/lora_h100.md).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.measure.run_gpu import save, trainfit

STEPS = ["--steps", "5", "--warmup", "2"]

CASES: dict[str, list[str]] = {
    "qwen2-0.5b-r16-bf16": [
        "qwen2-0.5b", "--lora", "16", "--precision", "bf16", "--seq", "1024", "--batch", "4",
    ],
    "llama-3.2-1b-r16-bf16-ckpt": [
        "llama-3.2-1b", "--lora", "16", "--precision", "bf16", "--checkpointing",
        "--seq", "2048", "--batch", "4",
    ],
    "gpt2-r8-fp32": ["gpt2", "--lora", "8", "--precision", "fp32", "--seq", "512", "--batch", "8"],
    "tinyllama-1.1b-r32-pure-bf16": [
        "tinyllama-1.1b", "--lora", "32", "--precision", "pure-bf16", "--seq", "1024",
        "--batch", "2",
    ],
}  # fmt: skip
QLORA_CASES: dict[str, list[str]] = {
    "llama-3.2-1b-qlora-r16-bf16-ckpt": [
        "llama-3.2-1b", "--qlora", "--lora", "16", "--precision", "bf16", "--checkpointing",
        "--seq", "2048", "--batch", "4",
    ],
}  # fmt: skip


def _tiny_cases(directory: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The same flags on a 2-layer llama config (a CPU check of the harness end to end)."""
    import transformers

    transformers.LlamaConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=512,
        max_position_embeddings=256,
    ).save_pretrained(directory)
    base = [str(directory), "--seq", "64", "--batch", "2"]
    return (
        {
            "tiny-r8-fp32": [*base, "--lora", "8"],
            "tiny-r8-fp32-ckpt": [*base, "--lora", "8", "--checkpointing"],
        },
        {"tiny-qlora-r8-bf16": [*base, "--qlora", "--precision", "bf16"]},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for the JSON")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model (harness check)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    where = ["--on", args.device]
    if args.device == "cpu":
        where += ["--device", "cpu"]
    with tempfile.TemporaryDirectory() as tmp:
        cases, qlora = _tiny_cases(Path(tmp)) if args.tiny else (CASES, QLORA_CASES)
        _environment(out, args.device)
        for name, flags in cases.items():
            save(out, f"lora/{name}", trainfit(["measure", *flags, *where, *STEPS, "--json"], 240))
        target = ["--device", "cpu"] if args.device == "cpu" else []
        for name, flags in qlora.items():
            record = trainfit(["estimate", *flags, *target, "--json"], 240)
            record["measure"] = trainfit(["measure", *flags, *where, *STEPS, "--json"], 120)
            save(out, f"qlora/{name}", record)


def _environment(out: Path, device: str) -> None:
    import json
    import subprocess

    if device == "cuda":
        from benchmarks.measure.run_gpu import environment

        environment(out)
        data = json.loads((out / "environment.json").read_text())
        data["peft"] = _peft_version()
        (out / "environment.json").write_text(json.dumps(data, indent=1))
        return
    import datetime
    import platform

    import torch
    import transformers

    (out / "environment.json").write_text(
        json.dumps(
            {
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                "nvidia_smi": f"CPU ({platform.machine()}), no GPU",
                "torch": torch.__version__,
                "cuda": None,
                "transformers": transformers.__version__,
                "peft": _peft_version(),
                "python": platform.python_version(),
                "uname": subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout,
            },
            indent=1,
        )
    )


def _peft_version() -> str | None:
    try:
        import peft
    except ImportError:
        return None
    return peft.__version__


if __name__ == "__main__":
    main()
