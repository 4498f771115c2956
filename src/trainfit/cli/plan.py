"""`trainfit plan`: the settings that fit each device, a verdict, tiers and the ladder.

The options are read into `PlanOptions` and planned by `trainfit.specfile.run.run_plan`
(a spec file: `cli.spec_file`); this module renders the results."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from trainfit.cli import help as helps
from trainfit.hardware.catalog import DEFAULT_DEVICES

if TYPE_CHECKING:
    from trainfit.specfile.options import PlanOptions
    from trainfit.specfile.run import FilesWritten, PlanResult


EXAMPLES = (
    "trainfit plan llama-3.1-8b --effective-batch 32 --seq 2048 --device h100 --device a100-40gb",
    "trainfit plan gpt2 --effective-batch 64 --seq 512 --tokens 1000000000 --report out",
    "trainfit plan qwen2.5-14b --effective-batch 64 --seq 1024 --preference dpo --strategy fsdp2",
    "trainfit plan qwen2-0.5b --inference --context 2048 --new-tokens 256 --infer-batch 8",
    "trainfit plan spec.yaml --device rtx-4090   # a spec file; options typed here win",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `plan` subcommand."""
    from trainfit.cli import inference, report_args, run_args, spec_args

    parser = helps.command_parser(
        sub,
        "plan",
        "settings that fit each device, with a verdict",
        (
            helps.MODEL,
            helps.BATCH,
            helps.PRECISION,
            helps.DEVICES,
            helps.TIME,
            helps.INFERENCE,
            helps.OUTPUT,
        ),
        EXAMPLES,
        arguments="MODEL|SPEC.yaml [options]",
    )
    model = helps.group(parser, helps.MODEL)
    model.add_argument(
        "model",
        help="catalog name, HF model directory or hub id, or pkg:fn; or a plan spec file "
        "(SPEC.yaml: docs/spec-file.md), whose values the options given here override",
    )
    spec_args.add_model_arguments(model)
    helps.group(parser, helps.BATCH).add_argument(
        "--effective-batch",
        type=int,
        default=None,
        help="samples (pairs with --preference) per optimizer step (required unless "
        "--inference); the plan picks the micro-batch and the accumulation",
    )
    memory = helps.group(parser, helps.PRECISION)
    memory.add_argument("--precision", default=None, help="force a precision (default: per device)")
    memory.add_argument("--optimizer", default="adamw", help="adamw | adam | sgd | ...")
    memory.add_argument(
        "--freeze",
        action="append",
        default=[],
        metavar="PATTERN",
        help="freeze parameters whose names match this glob (repeatable)",
    )
    memory.add_argument(
        "--margin", type=float, default=0.10, help="fraction of device memory kept free"
    )
    spec_args.add_lora_arguments(parser)
    spec_args.add_preference_arguments(parser)
    spec_args.add_optimizer_path_argument(parser)
    devices = helps.group(parser, helps.DEVICES)
    devices.add_argument(
        "--device",
        action="append",
        default=[],
        help=f"a device to plan for (repeatable; default {', '.join(DEFAULT_DEVICES)})",
    )
    devices.add_argument(
        "--strategy",
        default=None,
        help="plan over several GPUs with this engine: auto | ddp | fsdp2 | fsdp2-hybrid | "
        "zero1 | zero2 | zero3 (default: only GPUs that cannot hold the job alone, auto)",
    )
    devices.add_argument(
        "--offload",
        default=None,
        help="none | optimizer | params: what host RAM holds (default: auto, offload last)",
    )
    devices.add_argument(
        "--nodes", type=int, default=None, help="machines to plan over (with --gpus: all GPUs)"
    )
    devices.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes to trace in (default: 2 where there are 2 cores; 1 keeps one process)",
    )
    run_args.add_arguments(parser)
    time = helps.group(parser, helps.TIME)
    time.add_argument(
        "--stage",
        action="append",
        default=[],
        metavar="EPOCHS[:PATTERN,...]",
        help="a stage of a staged schedule: its epochs and the parameters frozen in it "
        "(repeatable; e.g. --stage '5:backbone.*' --stage 50): each stage is planned",
    )
    time.add_argument(
        "--measured-step",
        type=float,
        default=None,
        help="seconds per optimizer step you measured with the plan's setting on --measured-on "
        "(with --stage: the last stage's step; every stage is scaled by the same ratio)",
    )
    time.add_argument(
        "--measured-on",
        default=None,
        help="the device --measured-step was measured on (default: the first --device)",
    )
    inference.add_arguments(parser)
    output = helps.group(parser, helps.OUTPUT)
    output.add_argument("--json", action="store_true", help="print JSON instead of tables")
    output.add_argument(
        "--yes",
        action="store_true",
        help="start a plan counted to run for more than three minutes (many models or devices) "
        "without asking",
    )
    output.add_argument(
        "--config-dir", default=None, help="write config_<device>.yaml for each device that fits"
    )
    output.add_argument(
        "--export",
        action="append",
        default=[],
        choices=("hf", "lightning", "accelerate", "yaml", "torchrun", "deepspeed"),
        help="write each device's settings for a trainer: hf (TrainingArguments JSON), lightning "
        "(Trainer JSON), accelerate (config YAML), yaml (seed-style config), torchrun "
        "(launch_<device>.sh + fsdp2_<device>.json + train_fsdp2.py), deepspeed "
        "(ds_config_<device>.json + accelerate_ds_<device>.yaml); repeatable",
    )
    output.add_argument(
        "--export-dir",
        default=None,
        help="where --export writes hf_<device>.json ... (default: the current directory)",
    )
    report_args.add_arguments(parser)


BATCH_HINT = (
    "plan has no --batch (the micro-batch of estimate and measure): give --effective-batch N, "
    "the samples per optimizer step, and the plan picks the micro-batch; with --inference, "
    "--infer-batch N is the sequences generated together"
)
"""Said to `trainfit plan ... --batch N`, for the flag of another command."""

COMMAND_LINE_ONLY = ("yes",)
"""`plan` options that are no `PlanOptions` field (nor a spec-file field)."""


def options_of(args: argparse.Namespace) -> PlanOptions:
    """The parsed `plan` options, typed (lists become tuples)."""
    from trainfit.specfile.options import PlanOptions

    return PlanOptions(**typed_options(vars(args)))


def typed_options(values: dict[str, Any]) -> dict[str, Any]:
    """Parsed option values by name, as `PlanOptions` holds them (lists become tuples)."""
    from trainfit.specfile.options import PlanOptions

    names = {f.name for f in dataclasses.fields(PlanOptions)}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in names}


def run(args: argparse.Namespace) -> int:
    """Plan and print; returns the exit code."""
    from trainfit.cli import report_args
    from trainfit.cli.progress import shown, status
    from trainfit.io import staged_directories
    from trainfit.progress import Part, tell
    from trainfit.specfile.duration import check_confirmed, workload
    from trainfit.specfile.run import run_plan

    options = options_of(args)
    check_confirmed(workload([options]), args.yes)
    show = shown(options.json)
    # NB: every output directory is written whole or not at all (a failure or Ctrl-C leaves
    # none of them behind)
    with staged_directories() as outputs:
        with status(show):
            tell(Part.MODEL, options.model)  # NB: shown while the model is loaded and counted
            result = run_plan(options, outputs=outputs)
        if options.json:
            print(json.dumps(as_json(result), indent=2))
        else:
            render(result)
        reported = report_args.write(options.report, [result], outputs, show=show)
    print_files(result)
    report_args.print_written(reported)
    return 0


def as_json(result: PlanResult) -> object:
    """A model's result as the JSON printed with --json."""
    from trainfit.plan.stages import StagedPlan
    from trainfit.plan.words import plan_dict

    if isinstance(result.plan, StagedPlan):
        return result.plan.to_dict()
    if result.plan is not None:
        return plan_dict(result.plan)
    if result.generation:
        from trainfit.report.inference import inference_dict

        return {"inference": [inference_dict(e) for e in result.generation]}
    from trainfit.report.document.planned import serving_rows

    return {"inference": [dataclasses.asdict(r) for r in serving_rows(result)]}


def render(result: PlanResult) -> None:
    """A model's result as tables on stdout: the plan (or each stage), then inference."""
    from rich.console import Console

    from trainfit.cli.inference import print_rows
    from trainfit.plan.stages import StagedPlan
    from trainfit.report.document.planned import serving_rows

    if isinstance(result.plan, StagedPlan):
        from trainfit.report.stages import staged_renderable

        Console().print(staged_renderable(result.plan))
    elif result.plan is not None:
        from trainfit.report.plan import plan_renderable

        Console().print(plan_renderable(result.plan))
    if result.generation:
        from trainfit.report.inference import inference_renderable

        Console().print(inference_renderable(result.generation))
    elif result.serving:
        print_rows(serving_rows(result))


def print_files(result: PlanResult) -> None:
    """The files a model's plan wrote, one line each on stderr."""
    for files in result.files:
        _print_written(files)


def _print_written(files: FilesWritten) -> None:
    for path in files.configs:
        print(f"wrote {path}", file=sys.stderr)
    if files.exported is not None:
        from trainfit.export.layout_words import device_note_text

        for line in files.exported.skipped:
            print(f"skipped {line}", file=sys.stderr)
        for path in files.exported.written:
            print(f"wrote {path}", file=sys.stderr)
        for note in files.exported.notes:
            print(f"note: {device_note_text(note)}", file=sys.stderr)
