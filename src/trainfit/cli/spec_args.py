"""The training-spec options shared by `trainfit estimate` and `trainfit measure`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from trainfit.cli import help as helps

if TYPE_CHECKING:
    from trainfit.spec import TrainSpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that make a TrainSpec (all but the model and the target device), in the groups
    of `trainfit.cli.help` (model, batch, precision and memory)."""
    model = helps.group(parser, helps.MODEL)
    add_model_arguments(model)
    model.add_argument(
        "--no-cache",
        dest="use_cache",
        action="store_false",
        default=None,
        help="build a transformers model with config.use_cache=False (default: a user's config "
        "keeps its own value, a catalog model is built without the cache)",
    )
    batch = helps.group(parser, helps.BATCH)
    batch.add_argument("--batch", type=int, default=1, help="micro-batch (samples per step)")
    batch.add_argument("--grad-accum", type=int, default=1, help="micro-batches per step")
    memory = helps.group(parser, helps.PRECISION)
    memory.add_argument("--precision", default="fp32", help="fp32 | tf32 | fp16 | bf16 | pure-bf16")
    memory.add_argument(
        "--optimizer",
        default="adamw",
        help="adamw | adam | sgd | sgd-momentum | adafactor | adamw-8bit",
    )
    add_optimizer_path_argument(parser)
    memory.add_argument("--checkpointing", action="store_true", help="gradient checkpointing")
    memory.add_argument(
        "--checkpoint-modules",
        default=None,
        metavar="GLOB",
        help="modules to checkpoint in a plain module (default: every outer ModuleList's blocks)",
    )
    memory.add_argument(
        "--freeze",
        action="append",
        default=[],
        metavar="PATTERN",
        help="freeze parameters whose names match this glob (repeatable)",
    )
    memory.add_argument("--grad-clip", type=float, default=None, help="clip gradient norm")
    add_lora_arguments(parser)
    add_preference_arguments(parser)


def add_model_arguments(model: argparse._ArgumentGroup) -> None:
    """What the model is given with, shared by `estimate`, `measure` and `plan`: the sequence
    length, a plain module's inputs, the per-sample multiplier, the loss or step function and
    the head to train."""
    model.add_argument(
        "--seq",
        type=int,
        default=None,
        help="sequence length (default: the model's maximum positions, at most 1024)",
    )
    model.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=B,...:DTYPE",
        help="an input of a plain module, e.g. 'x=B,3,224,224:float32' (repeatable)",
    )
    model.add_argument(
        "--multiplier",
        type=int,
        default=1,
        help="per-sample multiplier of the batch dimension (e.g. patches)",
    )
    model.add_argument("--loss", default=None, help="pkg.module:fn(output, batch) -> loss")
    model.add_argument("--step-fn", default=None, help="pkg.module:fn(model, batch) -> loss")
    model.add_argument(
        "--task",
        default=None,
        help="the head to train: a transformers task (sequence-classification, "
        "token-classification, question-answering, multiple-choice, causal-lm, masked-lm, ...) "
        "or its AutoModelFor... class name; default: the class the config's architectures name",
    )


def add_lora_arguments(parser: argparse.ArgumentParser) -> None:
    """--lora RANK, --lora-alpha, --lora-dropout, --lora-targets, --qlora (model group)."""
    model = helps.group(parser, helps.MODEL)
    model.add_argument(
        "--lora", type=int, default=None, metavar="RANK", help="LoRA adapters of this rank (peft)"
    )
    model.add_argument(
        "--lora-alpha", type=float, default=None, help="LoRA alpha (default 2 x rank)"
    )
    model.add_argument(
        "--lora-dropout", type=float, default=None, help="dropout on the LoRA input (default 0)"
    )
    model.add_argument(
        "--lora-targets",
        default=None,
        metavar="A,B,...",
        help="modules to adapt (default: peft's for the architecture, else every Linear but "
        "the head)",
    )
    model.add_argument(
        "--qlora",
        action="store_true",
        help="4-bit NF4 base with paged 8-bit AdamW (modelled; implies --lora 8 unless given)",
    )


def lora(args: argparse.Namespace) -> dict[str, object] | None:
    """The LoRA settings the options describe (a dict of LoraSpec's fields), or None."""
    from trainfit.specfile.checks import lora_fields

    return lora_fields(
        getattr(args, "lora", None),
        args.lora_alpha,
        args.lora_dropout,
        args.lora_targets,
        getattr(args, "qlora", False),
    )


def add_preference_arguments(parser: argparse.ArgumentParser) -> None:
    """`--preference`, `--reference` and the dtype options (also on `trainfit plan`)."""
    model = helps.group(parser, helps.MODEL)
    model.add_argument(
        "--preference",
        default=None,
        metavar="dpo",
        help="preference training (dpo): the batch counts chosen/rejected pairs (causal LMs)",
    )
    model.add_argument(
        "--reference",
        default="model",
        metavar="model|precomputed",
        help="DPO reference: a frozen copy on the device (model, default) or log-probs given "
        "in the batch (precomputed)",
    )
    add_dtype_arguments(parser)


def add_optimizer_path_argument(parser: argparse.ArgumentParser) -> None:
    """`--optimizer-path` (also on `trainfit plan`; precision and memory group)."""
    helps.group(parser, helps.PRECISION).add_argument(
        "--optimizer-path",
        default="auto",
        metavar="auto|foreach|for-loop|fused",
        help="PyTorch's implementation of the optimizer step (auto: PyTorch's default on the "
        "device, foreach on CUDA; fused: fused=True, for Adam, AdamW and SGD)",
    )


def add_dtype_arguments(parser: argparse.ArgumentParser) -> None:
    """`--weights-dtype` and `--reference-dtype` (also on `trainfit plan`)."""
    memory = helps.group(parser, helps.PRECISION)
    memory.add_argument(
        "--weights-dtype",
        default="auto",
        metavar="auto|fp32|bf16|fp16",
        help="the dtype the weights load in (auto: the config's torch_dtype for a LoRA base, as "
        "from_pretrained loads it; a full fine-tune keeps fp32 master weights)",
    )
    memory.add_argument(
        "--reference-dtype",
        default=None,
        metavar="auto|fp32|bf16|fp16",
        help="the DPO reference copy's dtype (default: the policy's weights')",
    )


def spec(args: argparse.Namespace, device: str | None = None) -> TrainSpec:
    """The TrainSpec the options describe, for `device` (default: --device)."""
    from trainfit.spec import TrainSpec

    return TrainSpec(
        model=args.model,
        batch=args.batch,
        seq_len=args.seq,
        inputs=tuple(args.input),
        multiplier=args.multiplier,
        precision=args.precision,
        optimizer=args.optimizer,
        checkpointing=args.checkpointing,
        checkpoint_modules=args.checkpoint_modules,
        freeze=tuple(args.freeze),
        grad_clip=args.grad_clip,
        grad_accum=args.grad_accum,
        loss=args.loss,
        step_fn=args.step_fn,
        task=args.task,
        preference=args.preference,
        reference=args.reference,
        weights_dtype=args.weights_dtype,
        reference_dtype=args.reference_dtype,
        optimizer_path=args.optimizer_path,
        use_cache=getattr(args, "use_cache", None),
        device=device or args.device,
        lora=lora(args),
    )
