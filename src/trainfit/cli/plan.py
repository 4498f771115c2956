"""`trainfit plan`: the settings that fit each device, a verdict, tiers and the ladder."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

DEFAULT_DEVICES = ("h100", "a100-80gb", "rtx-4060")
"""Devices planned when none is named (the rows every catalog version has)."""


if TYPE_CHECKING:
    from trainfit.plan.core import Plan
    from trainfit.spec import Precision, TrainSpec
    from trainfit.timing.run import RunSpec


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `plan` subcommand."""
    parser = sub.add_parser("plan", help="settings that fit each device, with a verdict")
    parser.add_argument(
        "model",
        help="catalog name, HF model directory or hub id, or pkg:fn; or a plan spec file "
        "(SPEC.yaml: docs/spec-file.md), whose values the options given here override",
    )
    parser.add_argument(
        "--effective-batch",
        type=int,
        default=None,
        help="samples (pairs with --preference) per optimizer step (required unless --inference)",
    )
    parser.add_argument("--seq", type=int, default=None, help="sequence length")
    parser.add_argument(
        "--input", action="append", default=[], metavar="NAME=B,...:DTYPE", help="an input"
    )
    parser.add_argument("--multiplier", type=int, default=1, help="per-sample multiplier")
    parser.add_argument("--precision", default=None, help="force a precision (default: per device)")
    parser.add_argument("--optimizer", default="adamw", help="adamw | adam | sgd | ...")
    parser.add_argument("--freeze", action="append", default=[], metavar="PATTERN")
    parser.add_argument("--loss", default=None, help="pkg.module:fn(output, batch) -> loss")
    parser.add_argument("--step-fn", default=None, help="pkg.module:fn(model, batch) -> loss")
    parser.add_argument("--task", default=None, help="override the model family's default task")
    parser.add_argument(
        "--device",
        action="append",
        default=[],
        help=f"a device to plan for (repeatable; default {', '.join(DEFAULT_DEVICES)})",
    )
    parser.add_argument(
        "--margin", type=float, default=0.10, help="fraction of device memory kept free"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes to trace in (default: 2 where there are 2 cores; 1 keeps one process)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--config-dir", default=None, help="write config_<device>.yaml for each device that fits"
    )
    parser.add_argument(
        "--export",
        action="append",
        default=[],
        choices=("hf", "lightning", "accelerate", "yaml", "torchrun", "deepspeed"),
        help="write each device's settings for a trainer: hf (TrainingArguments JSON), lightning "
        "(Trainer JSON), accelerate (config YAML), yaml (seed-style config), torchrun "
        "(launch_<device>.sh + fsdp2_<device>.json + train_fsdp2.py), deepspeed "
        "(ds_config_<device>.json + accelerate_ds_<device>.yaml); repeatable",
    )
    parser.add_argument(
        "--strategy",
        default=None,
        help="plan over several GPUs with this engine: auto | ddp | fsdp2 | fsdp2-hybrid | "
        "zero1 | zero2 | zero3 (default: only GPUs that cannot hold the job alone, auto)",
    )
    parser.add_argument(
        "--offload",
        default=None,
        help="none | optimizer | params: what host RAM holds (default: auto, offload last)",
    )
    parser.add_argument(
        "--nodes", type=int, default=None, help="machines to plan over (with --gpus: all GPUs)"
    )
    parser.add_argument(
        "--stage",
        action="append",
        default=[],
        metavar="EPOCHS[:PATTERN,...]",
        help="a stage of a staged schedule: its epochs and the parameters frozen in it "
        "(repeatable; e.g. --stage '5:backbone.*' --stage 50): each stage is planned",
    )
    parser.add_argument(
        "--export-dir",
        default=None,
        help="where --export writes hf_<device>.json ... (default: the current directory)",
    )
    from trainfit.cli import inference, run_args, spec_args

    spec_args.add_lora_arguments(parser)
    spec_args.add_preference_arguments(parser)
    inference.add_arguments(parser)
    run_args.add_arguments(parser)
    parser.add_argument(
        "--measured-step",
        type=float,
        default=None,
        help="seconds per optimizer step you measured with the plan's setting on --measured-on "
        "(with --stage: the last stage's step; every stage is scaled by the same ratio)",
    )
    parser.add_argument(
        "--measured-on", default=None, help="the device --measured-step was measured on"
    )
    from trainfit.cli import report_args

    report_args.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Plan and print; returns the exit code."""
    from trainfit.cli import spec_args
    from trainfit.errors import SpecError
    from trainfit.plan.core import plan
    from trainfit.spec import Precision, TrainSpec, parse_enum

    devices = tuple(args.device) or DEFAULT_DEVICES
    if args.inference and args.effective_batch is None:  # NB: serving only
        from trainfit.cli.inference import run_inference

        return run_inference(args, devices)
    if args.effective_batch is None:  # NB: not argparse-required: a spec file may give it
        raise SpecError(["trainfit plan needs --effective-batch N (or --inference)"])
    if args.export_dir is not None and not args.export:
        raise SpecError(["--export-dir needs --export (hf, lightning, accelerate or yaml)"])
    if args.export:
        from trainfit.export.core import check_directory, require_packages

        require_packages(args.export)  # NB: before planning, which takes seconds
        check_directory(args.export_dir or ".")  # NB: so is an unwritable directory
    if args.config_dir:
        from trainfit.export.core import check_directory

        check_directory(args.config_dir, "config directory")
    spec = TrainSpec(
        model=args.model,
        seq_len=args.seq,
        inputs=tuple(args.input),
        multiplier=args.multiplier,
        optimizer=args.optimizer,
        freeze=tuple(args.freeze),
        loss=args.loss,
        step_fn=args.step_fn,
        task=args.task,
        preference=args.preference,
        reference=args.reference,
        device=devices[0],
        lora=spec_args.lora(args),
    )
    from trainfit.cli import run_args

    run = run_args.run_spec(args)
    run_args.check_sized(run, args)
    from trainfit.cli import report_args

    report_args.check(args)
    precision = parse_enum(Precision, "precision", args.precision) if args.precision else None
    multi = _multi_gpu(args)
    if args.stage:
        return _staged(args, spec, devices, precision, run)
    result = plan(
        spec,
        args.effective_batch,
        devices,
        margin=args.margin,
        precision=precision,
        jobs=args.jobs,
        run=run,
        measured_step=run_args.measured(args, devices[0]),
        progress=report_args.start(args),
        **multi,
    )
    report_args.stop()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from rich.console import Console

        from trainfit.report.plan import plan_renderable

        Console().print(plan_renderable(result))
    _write_files(args, result, "")
    report_args.write(args, [result], inference=_serving(args, devices))
    return 0


def _multi_gpu(args: argparse.Namespace) -> dict[str, object]:
    """plan()'s multi-GPU arguments from --strategy, --offload, --gpus and --nodes."""
    from trainfit.distributed.strategy import Offload, Strategy
    from trainfit.spec import parse_enum

    strategy = offload = None
    asked = args.strategy is not None or args.offload is not None or args.nodes is not None
    if args.strategy not in (None, "auto"):
        strategy = parse_enum(Strategy, "strategy", args.strategy)
    if args.offload is not None:
        offload = parse_enum(Offload, "offload", args.offload)
    if strategy is not None and offload is not None:
        from trainfit.distributed.strategy import check_offload

        check_offload(strategy, offload)  # NB: before planning, which takes seconds
    # NB: --gpus 1 is the default: the GPU count is then searched
    gpus = args.gpus if args.gpus != 1 else None
    if not asked and gpus is None:
        return {}
    return dict(strategy=strategy, offload=offload, gpus=gpus, nodes=args.nodes, multi_gpu=True)


def _staged(
    args: argparse.Namespace,
    spec: TrainSpec,
    devices: tuple[str, ...],
    precision: Precision | None,
    run: RunSpec | None,
) -> int:
    """`--stage ...`: every stage planned; configs and exports per stage (DIR/stageN)."""

    from trainfit.cli import run_args
    from trainfit.plan.stages import plan_stages

    stages = run_args.stages(args.stage, spec)
    from trainfit.cli import report_args

    report_args.start(args, f"planning {len(stages)} stages")
    staged = plan_stages(
        spec,
        stages,
        args.effective_batch,
        devices,
        margin=args.margin,
        precision=precision,
        jobs=args.jobs,
        run=run,
        measured_step=run_args.measured(args, devices[0]),
    )
    report_args.stop()
    if args.json:
        print(json.dumps(staged.to_dict(), indent=2))
    else:
        from rich.console import Console

        from trainfit.report.stages import staged_renderable

        Console().print(staged_renderable(staged))
    rows = _serving(args, devices)
    for number, stage in enumerate(staged.stages, 1):
        _write_files(args, stage.plan, f"stage{number}")
    report_args.write(args, [staged], inference=rows)
    return 0


def _serving(args: argparse.Namespace, devices: tuple[str, ...]) -> tuple:
    """With --inference beside a training plan: the inference rows on the same devices
    (printed unless --json; the report's Inference section)."""
    if not args.inference:
        return ()
    from trainfit.cli.inference import print_rows, serving_rows, serving_spec

    # NB: the model as served: no LoRA, preference pair or frozen layers of the training spec
    rows = serving_rows(args, serving_spec(args), devices)
    if not args.json:
        print_rows(rows)
    return rows


def _write_files(args: argparse.Namespace, result: Plan, subdirectory: str) -> None:
    """`--config-dir` and `--export` files of one plan, under `subdirectory` of each."""
    from pathlib import Path

    if args.config_dir:
        from trainfit.export.configs import write_configs

        for path in write_configs(result, Path(args.config_dir) / subdirectory):
            print(f"wrote {path}", file=sys.stderr)
    if args.export:
        from trainfit.export.core import write_exports

        where = Path(args.export_dir or ".") / subdirectory
        exported = write_exports(result, args.export, where)
        for line in exported.skipped:
            print(f"skipped {line}", file=sys.stderr)
        for path in exported.written:
            print(f"wrote {path}", file=sys.stderr)
        for note in exported.notes:
            print(f"note: {note}", file=sys.stderr)
