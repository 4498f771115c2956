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

from dataclasses import dataclass

import torch

from trainfit.models.source import build_program
from trainfit.spec import TrainSpec
from trainfit.trace.context import tracing
from trainfit.trace.costs import StepCosts
from trainfit.trace.step import Category, StepTrace
from trainfit.trace.target import Target
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
    autocast_dtype = spec.precision.autocast_dtype
    with tracing(net, target, autocast_dtype, transformers=program.is_hf, grad=False) as tracer:
        recorder = tracer.recorder
        weights = tracer.track_weights((*net.parameters(), *net.buffers()))
        batch = program.make_batch(torch.device("cpu"), False)
        recorder.phase = Phase.FORWARD
        with tracer.failures("the forward", "check the inputs and precision given for this model"):
            with tracer.rules.autocast():
                out = program.compute_loss(net, batch)
            del out
        recorder.phase = Phase.SETUP
        del batch
    categories = dict.fromkeys(weights, Category.PARAMETERS)
    categories.update(dict.fromkeys(tracer.library_keys(), Category.WORKSPACES))
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
