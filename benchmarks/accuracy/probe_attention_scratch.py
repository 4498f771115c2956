"""Does cuDNN attention's backward allocate its per-score dropout scratch? (H100 probe.)

For each model/shape: one forward+backward under autocast with the allocator's history on;
reports whether backward allocated blocks of batch x heads x q x k bytes (1 per score) and
4 bytes per score.  PYTHONPATH=src:. python -m benchmarks.accuracy.probe_attention_scratch OUT
"""

from __future__ import annotations

import json
import sys

import torch

CONFIGS = [
    # name, factory, heads, batch, seq, dtype
    ("melody", "zoo:melody_transformer", 8, 16, 256, "fp16"),
    ("melody", "zoo:melody_transformer", 8, 16, 256, "bf16"),
    ("melody", "zoo:melody_transformer", 8, 8, 512, "bf16"),
    ("melody", "zoo:melody_transformer", 8, 4, 1024, "fp16"),
    ("tiny-gpt", "user:tiny_gpt", 8, 16, 256, "bf16"),
    ("tiny-gpt", "user:tiny_gpt", 8, 8, 512, "bf16"),
    ("tiny-gpt", "user:tiny_gpt", 8, 4, 1024, "bf16"),
    ("gpt2", "hf:gpt2", 12, 8, 256, "bf16"),
    ("gpt2", "hf:gpt2", 12, 4, 512, "bf16"),
    ("gpt2", "hf:gpt2", 12, 2, 1024, "bf16"),
]


def build(factory: str) -> torch.nn.Module:
    kind, name = factory.split(":")
    if kind == "zoo":
        from trainfit.models import zoo

        return getattr(zoo, name)()
    if kind == "user":
        from benchmarks.accuracy import user_steps

        return getattr(user_steps, name)()
    import transformers

    return transformers.GPT2LMHeadModel(transformers.GPT2Config())


def run(factory: str, heads: int, batch: int, seq: int, dtype: str) -> dict[str, object]:
    model = build(factory).cuda().train()
    vocab = 388 if "melody" in factory else 1000 if "tiny" in factory else 50257
    ids = torch.randint(vocab, (batch, seq), device="cuda")
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=200_000)
    with torch.autocast("cuda", dtype=torch.float16 if dtype == "fp16" else torch.bfloat16):
        if factory.startswith("hf:"):
            loss = model(input_ids=ids, labels=ids).loss
        else:
            out = model(ids)
            loss = torch.nn.functional.cross_entropy(out.float(), ids.flatten())
    marker = len(torch.cuda.memory._snapshot()["device_traces"][0])
    loss.backward()
    torch.cuda.synchronize()
    trace = torch.cuda.memory._snapshot()["device_traces"][0][marker:]
    torch.cuda.memory._record_memory_history(enabled=None)
    scores = batch * heads * seq * seq
    sizes = [e["size"] for e in trace if e["action"] == "alloc"]
    return {
        "scores": scores,
        "one_byte_blocks": sum(1 for s in sizes if s == scores),
        "four_byte_blocks": sum(1 for s in sizes if s == 4 * scores),
        "largest_backward_allocs": sorted(sizes, reverse=True)[:6],
    }


def main() -> None:
    rows = []
    for name, factory, heads, batch, seq, dtype in CONFIGS:
        try:
            row = run(factory, heads, batch, seq, dtype)
        except Exception as exc:
            row = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        row.update(name=name, batch=batch, seq=seq, dtype=dtype)
        rows.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    info = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "rows": rows,
    }
    with open(sys.argv[1], "w") as fh:
        json.dump(info, fh, indent=1)


if __name__ == "__main__":
    main()
