"""The training monitor on a real CUDA GPU: 30 steps of GPT-2, then a real out-of-memory.

    PYTHONPATH=src:. python benchmarks/monitor_gpu.py OUT_DIR

Trains GPT-2 (124M, built from its config: no download) for 30 optimizer steps, micro-batch 8 at
512 tokens with bf16 autocast and AdamW, under `trainfit.monitor.Monitor` with NVML sampling
every 0.2 s, writing OUT_DIR/train.csv and OUT_DIR/tensorboard/. Then runs one step at
1024 tokens in fp32 under a monitor given the matching TrainSpec, at micro-batch 48, then 96,
192, 384 until one runs out of memory (48 on an 80 GB card), and writes the OomReport to
OUT_DIR/oom.txt (its paragraph) and OUT_DIR/oom.json (its fields). OUT_DIR/environment.json
records the card and the versions; OUT_DIR/console.txt is the monitor's console output.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import torch

from trainfit.hardware.detect import match_catalog
from trainfit.monitor import Monitor, OomReport
from trainfit.monitor.oom_words import move_text, oom_text, rung_note_text
from trainfit.spec import TrainSpec

STEPS = 30
SEQ = 512
BATCH = 8
OOM_BATCHES = (48, 96, 192, 384)
"""Micro-batches tried in turn at 1024 tokens in fp32 until one runs out of memory (48 needs
about 87 GiB by trainfit's estimate: over an H100's 80 GB, its bf16 rung under it)."""
OOM_SEQ = 1024


def _model(device: torch.device) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_positions=OOM_SEQ)
    return GPT2LMHeadModel(config).to(device)


def _catalog_name(device: torch.device) -> str:
    props = torch.cuda.get_device_properties(device)
    name, _ = match_catalog(props.name, "cuda", props.total_memory)
    return name or "h100"


def train(out: Path, device: torch.device, console) -> dict[str, object]:
    model = _model(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    spec = TrainSpec(
        model="gpt2", batch=BATCH, seq_len=SEQ, precision="bf16", device=_catalog_name(device)
    )
    ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), device=device)
    with Monitor(
        model=model,
        optimizer=optimizer,
        spec=spec,
        interval_s=0.2,
        csv=str(out / "train.csv"),
        tensorboard=str(out / "tensorboard"),
        console=console,
    ) as mon:
        for _ in range(STEPS):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            mon.step(loss=loss)
    del model, optimizer, ids
    torch.cuda.empty_cache()
    last = mon.samples[-1]
    return {"samples": len(mon.samples), "notes": mon.notes, "last": dataclasses.asdict(last)}


def provoke_oom(device: torch.device, console, batch: int) -> OomReport | None:
    model = _model(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    spec = TrainSpec(model="gpt2", batch=batch, seq_len=OOM_SEQ, device=_catalog_name(device))
    ids = torch.randint(0, model.config.vocab_size, (batch, OOM_SEQ), device=device)
    mon = Monitor(model=model, optimizer=optimizer, spec=spec, console=console)
    try:
        with mon:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            mon.step(loss=loss)
    except torch.OutOfMemoryError:
        pass
    finally:
        del model, optimizer, ids
        torch.cuda.empty_cache()
    return mon.oom


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python benchmarks/monitor_gpu.py OUT_DIR", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", 0)
    import transformers

    environment = {
        "gpu": torch.cuda.get_device_name(device),
        "catalog_row": _catalog_name(device),
        "total_memory_bytes": torch.cuda.get_device_properties(device).total_memory,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    (out / "environment.json").write_text(json.dumps(environment, indent=2) + "\n")
    with open(out / "console.txt", "w") as console:
        trained = train(out, device, console)
        for batch in OOM_BATCHES:
            started = time.perf_counter()
            report = provoke_oom(device, console, batch)
            seconds = time.perf_counter() - started
            if report is not None:
                break
            print(f"micro-batch {batch} fitted; trying a larger one", file=console)
    summary = {
        "train": trained,
        "oom_micro_batch": batch if report is not None else None,
        "oom_step_and_report_seconds": round(seconds, 2),
    }
    if report is not None:
        (out / "oom.txt").write_text(oom_text(report) + "\n")
        fields = dataclasses.asdict(report)
        fields["text"] = oom_text(report)
        fields["phase"] = report.phase.value
        rung = report.next_rung
        fields["next_rung"] = {
            "change": move_text(rung.change),
            "needed_bytes": rung.needed_bytes,
            "current_needed_bytes": rung.current_needed_bytes,
            "saved_bytes": rung.saved_bytes,
            "fits": rung.fits,
            "device": rung.device,
            "note": "" if rung.note is None else rung_note_text(rung.note),
        }
        (out / "oom.json").write_text(json.dumps(fields, indent=2, default=str) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print((out / "console.txt").read_text())
    return 0 if report is not None else 1


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main(sys.argv))
