"""Trace one forward pass of a plain module without weights, under `torch.no_grad()`.

The serving counterpart of `trace.step`: the model is built as for training (`build_program`),
put in eval mode, and its program's forward (its loss function: the model's forward and the
loss on the synthetic batch) runs once under no_grad and the target's autocast, with the
`Recorder` underneath. No activation is kept for a backward, so the trace's peak is the
weights plus the largest set of activations live at once.

Known limitations: the loss the program computes is included (a few small ops beside the
model); `model.eval()` switches dropout and batch norm as a real serving loop would, but
nothing else (no `torch.compile`, no CUDA graphs, no fused inference kernels).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.models.source import build_program
from trainfit.spec import TrainSpec
from trainfit.trace.compat import internal_moved
from trainfit.trace.costs import StepCosts
from trainfit.trace.kernels.cudnn_conv import CudnnConv
from trainfit.trace.kernels.cudnn_rnn import LIBRARY_OP, CudnnLstm
from trainfit.trace.recorder import Recorder
from trainfit.trace.step import (
    Category,
    StepTrace,
    _fakeify,
    _module_tracking,
    _not_tracing_for_transformers,
    traced_failures,
)
from trainfit.trace.target import Target, TargetKind
from trainfit.training import Phase, apply_settings


@dataclass(frozen=True, kw_only=True, slots=True)
class ForwardTrace:
    """One no_grad forward: its allocations (a StepTrace) and its ops' costs."""

    step: StepTrace
    """Allocations and frees: the weights, then the forward's tensors."""
    costs: StepCosts
    """The forward's ops (backward and optimizer empty)."""
    task: str | None
    """The program's task ("causal-lm", ...; None for a plain module)."""


def trace_forward(spec: TrainSpec, target: Target) -> ForwardTrace:
    """Trace `spec`'s forward at micro-batch `spec.batch` under no_grad on `target` (autocast
    at `spec.precision`)."""
    program = build_program(spec, "meta")
    apply_settings(program, spec)
    net = program.model
    net.eval()
    try:
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        _fakeify(net, mode)
    except (AttributeError, ImportError) as exc:
        raise internal_moved(exc) from exc
    recorder = Recorder()
    rules = target.rules(spec.precision.autocast_dtype)
    cudnn = CudnnLstm(recorder) if target.kind is TargetKind.CUDA else None
    categories: dict[int, Category] = {}
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(rules.installed())
        except (AttributeError, ImportError) as exc:
            raise internal_moved(exc) from exc
        if cudnn is not None:
            stack.enter_context(cudnn.installed())
            stack.enter_context(CudnnConv(recorder).installed())
        stack.enter_context(mode)
        stack.enter_context(recorder)
        stack.enter_context(_module_tracking(recorder, net))
        if program.is_hf:
            stack.enter_context(_not_tracing_for_transformers())
        stack.enter_context(torch.no_grad())
        seen: set[int] = set()
        for tensor in (*net.parameters(), *net.buffers()):
            storage = id(tensor.untyped_storage())
            if storage in seen:
                continue
            seen.add(storage)
            key = recorder.track(tensor, "model.to(device)")
            if key is not None:
                categories[key] = Category.PARAMETERS
        batch = program.make_batch(torch.device("cpu"), False)
        recorder.phase = Phase.FORWARD
        with traced_failures(
            recorder, "the forward", "check the inputs and precision given for this model"
        ):
            with rules.autocast():
                out = program.compute_loss(net, batch)
            del out
        recorder.phase = Phase.SETUP
        del batch
    for event in recorder.events:
        if event.alloc and event.op.startswith(LIBRARY_OP):
            categories[event.key] = Category.WORKSPACES
    table = tuple(recorder.costs._table)  # NB: the log's table, in index order
    ops = next((o for _, phase, o in recorder.costs._runs() if phase is Phase.FORWARD), ())
    step = StepTrace(
        events=recorder.events,
        workspaces=recorder.workspaces,
        categories=categories,
        description=program.description,
        loss_note=program.loss_note,
        assumptions=recorder.assumptions,
        attention={},
        parameter_count=sum(p.numel() for p in net.parameters()),
        trainable_count=0,
        ops=recorder.ops,
        tokens_per_sample=program.tokens_per_sample,
    )
    return ForwardTrace(step=step, costs=StepCosts(table, tuple(ops), (), ()), task=program.task)
