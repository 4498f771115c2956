"""Train a GPT-2 built from its config with the settings `trainfit.autofitter` chooses.

    python examples/train_autofit.py                      # this machine's device
    python examples/train_autofit.py --device cpu --steps 3
    python examples/train_autofit.py --device cuda        # GPT-2 small, 1024 tokens

A plain PyTorch loop: autofit picks the micro-batch, accumulation, precision and checkpointing
from the estimate of the live model, confirms them with one real step, and the loop uses the
returned `Fit` (autocast, GradScaler, micro-batches). Two stages, as in a fine-tuning recipe:
the transformer blocks frozen for the first half of the steps, then everything trainable
(`fit.replan(freeze=())` at the switch). No downloads: the model is built from a config and
trained on a learnable synthetic task: each sequence repeats a random phrase of 8 tokens drawn
from 64 of the vocabulary, so the loss falls from about ln(vocabulary) within the first steps
(the 64 tokens) and on as the model learns to copy the phrase.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from trainfit.autofitter import Fit, autofit
from trainfit.errors import TrainfitError

SIZES = {
    # name: (layers, width, heads, vocabulary, sequence length, effective batch)
    "tiny": (2, 64, 2, 512, 64, 16),
    "small": (12, 768, 12, 50257, 1024, 64),  # GPT-2 small (124 M parameters)
}
BACKBONE = ["transformer.h.*"]
"""Stage 1 freezes the transformer blocks; the embeddings and the final norm train."""


def build(size: str) -> tuple[GPT2LMHeadModel, int, int, int]:
    """The model of `size`, its vocabulary, sequence length and effective batch."""
    layers, width, heads, vocab, seq, effective = SIZES[size]
    config = GPT2Config(
        n_layer=layers,
        n_embd=width,
        n_head=heads,
        vocab_size=vocab,
        n_positions=seq,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config), vocab, seq, effective


PERIOD, TOKENS = 8, 64
"""The synthetic task: a phrase of PERIOD tokens (of TOKENS of the vocabulary), repeated."""


def synthetic(vocab: int, seq: int, rows: int, count: int) -> list[dict[str, torch.Tensor]]:
    """`count` fixed batches of repeated random phrases (labels = inputs, as a causal LM
    trains): learnable, so the loss visibly falls in a few steps."""
    generator = torch.Generator().manual_seed(0)
    alphabet = torch.randperm(vocab, generator=generator)[:TOKENS]
    batches = []
    for _ in range(count):
        phrases = alphabet[torch.randint(TOKENS, (rows, PERIOD), generator=generator)]
        ids = phrases.repeat(1, -(-seq // PERIOD))[:, :seq].contiguous()
        batches.append({"input_ids": ids, "labels": ids})
    return batches


def train_step(
    model: torch.nn.Module, fit: Fit, optimizer: torch.optim.Optimizer, batch: dict
) -> float:
    """One optimizer step over `fit.effective_batch` samples in `fit.grad_accum` micro-batches."""
    total = torch.zeros(())
    for micro in fit.split(batch):
        with fit.autocast():
            loss = model(**micro).loss / fit.grad_accum
        (fit.scaler.scale(loss) if fit.scaler is not None else loss).backward()
        total = total + loss.detach().float().cpu()
    if fit.scaler is not None:
        fit.scaler.step(optimizer)
        fit.scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(total)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="cuda, cuda:N, mps or cpu (default: this machine's)")
    parser.add_argument("--size", choices=sorted(SIZES), help="default: small on CUDA, else tiny")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    parser.add_argument("--effective-batch", type=int, help="samples per optimizer step")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--no-confirm", action="store_true", help="skip the real check step")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    on_cuda = (args.device or ("cuda" if torch.cuda.is_available() else "")).startswith("cuda")
    model, vocab, seq, effective = build(args.size or ("small" if on_cuda else "tiny"))
    if args.effective_batch is not None:
        if args.effective_batch < 1:
            parser.error(
                f"--effective-batch must be a positive integer, got {args.effective_batch}"
            )
        effective = args.effective_batch
    data = synthetic(vocab, seq, effective, count=4)
    sample = {k: v[:2] for k, v in data[0].items()}  # shapes are what autofit needs
    try:
        fit = autofit(
            model,
            sample,
            effective,
            device=args.device,
            freeze=BACKBONE,
            confirm=not args.no_confirm,
        )
    except TrainfitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"stage 1 (blocks frozen)\n{fit.summary}", flush=True)
    optimizer = fit.make_optimizer(lr=args.lr)
    switch = max(1, args.steps // 2)
    started = time.perf_counter()
    for step in range(1, args.steps + 1):
        if step == switch + 1:
            del optimizer  # NB: its state would sit beside the confirming step of stage 2
            try:
                fit = fit.replan(freeze=())
            except TrainfitError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            print(f"stage 2 (everything trains)\n{fit.summary}", flush=True)
            optimizer = fit.make_optimizer(lr=args.lr / 3)
        loss = train_step(model, fit, optimizer, data[(step - 1) % len(data)])
        print(f"step {step}: loss {loss:.4f}", flush=True)
    elapsed = time.perf_counter() - started
    line = f"{args.steps} steps in {elapsed:.1f} s"
    if fit.device.type == "cuda":
        line += f"; peak reserved {torch.cuda.max_memory_reserved(fit.device) / 2**30:.2f} GiB"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
