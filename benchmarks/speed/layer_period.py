"""How a traced step grows with a decoder's layer count: the measurements behind the question
whether a trace of a few layers could stand for the full stack (`trainfit.trace.stamp` does
since, checked against a trace one layer up).

    PYTHONPATH=src:. python -m benchmarks.speed.layer_period   # adds to layer_period.md beside it

For Llama shapes traced with L, L+1 and L+2 layers (no trace store), each trace's events and
ops are counted, and the events of L and L+1 layers are aligned (`difflib`, each event read as
alloc/free, bytes, phase, iteration, op, and for a free the op and bytes of what it frees):
every difference found is an insertion, and the same insertions, of the same lengths, turn
L+1 layers into L+2. Then the trace's CPU seconds at 1, 2, 4 and all layers of the 1.1B and 7B
shapes: what a trace of a few layers would cost against the full one.
"""

from __future__ import annotations

import datetime
import difflib
import os
import platform
import tempfile
import time
from pathlib import Path

import torch
import transformers

from benchmarks.speed.bench_estimate import LLAMA_1B, LLAMA_7B
from trainfit import LoraSpec, TrainSpec
from trainfit.trace.step import StepTrace, trace_step

HERE = Path(__file__).parent
SMALL = dict(
    hidden_size=256,
    intermediate_size=704,
    num_attention_heads=8,
    num_key_value_heads=2,
    vocab_size=1000,
    max_position_embeddings=512,
)
SETTINGS = {
    "fp32, AdamW": {},
    "bf16, checkpointing": {"precision": "bf16", "checkpointing": True},
    "fp16, 2 micro-batches": {"precision": "fp16", "grad_accum": 2},
    "LoRA rank 8": {"lora": LoraSpec(rank=8)},
}


def _trace(folder: Path, shape: dict, layers: int, seq: int, **settings: object) -> StepTrace:
    where = folder / f"{id(shape)}-{layers}"
    if not where.exists():
        transformers.LlamaConfig(**{**shape, "num_hidden_layers": layers}).save_pretrained(where)
    return trace_step(TrainSpec(model=str(where), seq_len=seq, **settings))


def _tokens(trace: StepTrace) -> list[tuple[object, ...]]:
    made: dict[int, tuple[str, int]] = {}
    out: list[tuple[object, ...]] = []
    for e in trace.events:
        if e.alloc:
            made[e.key] = (e.op, e.nbytes)
            out.append(("alloc", e.nbytes, e.phase.value, e.iteration, e.op))
        else:
            out.append(("free", e.phase.value, e.iteration, *made[e.key]))
    return out


def _insertions(a: StepTrace, b: StepTrace) -> list[tuple[str, int]] | None:
    """(kind, length) of each difference between the two traces' events; None if any is not
    an insertion."""
    matcher = difflib.SequenceMatcher(None, _tokens(a), _tokens(b), autojunk=False)
    found = [(tag, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    return found if all(tag == "insert" for tag, _ in found) else None


def _period_rows(folder: Path) -> list[str]:
    rows = []
    for label, settings in SETTINGS.items():
        traces = [_trace(folder, SMALL, n, 64, **settings) for n in (2, 3, 4)]
        first, second = _insertions(traces[0], traces[1]), _insertions(traces[1], traces[2])
        same = first is not None and first == second
        blocks = [length for _, length in first] if first is not None else []
        rows.append(
            f"| {label} | {' / '.join(str(len(t.events)) for t in traces)} | "
            f"{' / '.join(str(t.ops) for t in traces)} | {len(blocks)}: "
            f"{', '.join(map(str, blocks))} | {'yes' if same else 'no'} |"
        )
    return rows


def _seconds(folder: Path, shape: dict, layers: int, seq: int, **settings: object) -> float:
    _trace(folder, shape, layers, seq, **settings)  # NB: the folder written, the process warm
    times = []
    for _ in range(2):
        started = time.process_time()
        _trace(folder, shape, layers, seq, **settings)
        times.append(time.process_time() - started)
    return min(times)


def main() -> None:
    os.environ["TRAINFIT_NO_CACHE"] = "1"
    os.environ["TRAINFIT_STAMP"] = "0"  # NB: the traces measured are made whole
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        period = _period_rows(folder)
        timing = []
        for label, shape, seq, settings in (
            ("1.1B Llama, fp32, seq 2048", LLAMA_1B, 2048, {}),
            (
                "7B Llama, bf16, checkpointing, seq 1024",
                LLAMA_7B,
                1024,
                {"precision": "bf16", "checkpointing": True},
            ),
        ):
            full = shape["num_hidden_layers"]
            cells = [f"{_seconds(folder, shape, n, seq, **settings):.2f}" for n in (1, 2, 4, full)]
            timing.append(f"| {label} | {' | '.join(cells)} | {full} |")
    lines = [
        "# A traced step against its layer count",
        "",
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()} with "
        f"{os.cpu_count()} cores (shared: load average {os.getloadavg()[0]:.1f} at the end), "
        f"torch {torch.__version__}, transformers {transformers.__version__}, Python "
        f"{platform.python_version()}; no trace store.",
        "",
        "Events and ops of a small Llama shape (hidden 256, seq 64) traced with 2 / 3 / 4 "
        "layers; the differences between the events of 2 and 3 layers (every one an insertion: "
        "their count and lengths), and whether 3 to 4 layers inserts the same:",
        "",
        "| setting | events | ops | insertions, 2 to 3 layers | same for 3 to 4 |",
        "|---|---|---|---|---|",
        *period,
        "",
        "CPU seconds of one trace (warm process, best of 2; CPU, not wall: the machine is "
        "shared) at 1, 2 and 4 layers and at the model's own count:",
        "",
        "| shape | 1 layer | 2 layers | 4 layers | all layers | layers |",
        "|---|---:|---:|---:|---:|---:|",
        *timing,
        "",
    ]
    target = HERE / "layer_period.md"
    if target.exists():  # NB: measured tables are added to, never overwritten
        lines = ["", "## Measured again", *lines[1:]]
        with target.open("a", encoding="utf-8") as out:
            out.write("\n".join(lines))
    else:
        target.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
