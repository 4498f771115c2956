"""Trace training iterations of a spec without weights, as a CUDA target would run them.

The model is built on the meta device, its parameters become fake CPU tensors (so that they
carry the autocast dispatch key), and two iterations run under FakeTensorMode with the
`Recorder` underneath: the first creates optimizer state, the second is the steady state.
CUDA's choices are injected: its autocast policy, the attention kernel it would pick, the
foreach optimizer path it defaults to, and a GradScaler that never reads the device. A CPU
target (`Target.cpu()`) injects nothing: the step runs as stock CPU PyTorch runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

import torch
from torch import nn

from trainfit.models.heads import ModelClass
from trainfit.models.lora import parameter_counts
from trainfit.models.program import Batch, Description, LossNote, StepProgram
from trainfit.models.source import build_program
from trainfit.models.weights import StepDtypes
from trainfit.optim import effective_optimizer, traced_optimizer
from trainfit.progress import Part, tell
from trainfit.spec import Precision, TrainSpec
from trainfit.trace import store
from trainfit.trace.compat import UntestedTorch, check_torch
from trainfit.trace.context import Tracer, tracing
from trainfit.trace.costs import CostLog, StepCosts
from trainfit.trace.kernels.attention import SdpaBackend, SdpaCall
from trainfit.trace.recorder import DataCheck, Event, Recorder, WorkspaceEvent
from trainfit.trace.reuse import PassReuse, RecordedPass
from trainfit.trace.stamp import StampNote, Unstamped, stamped, stamping
from trainfit.trace.target import Target
from trainfit.training import (
    Phase,
    StepRig,
    apply_settings,
    needs_scaler,
    run_iteration,
)


class Category(str, Enum):
    """What a block of device memory holds (the breakdown's rows)."""

    PARAMETERS = "parameters"
    GRADIENTS = "gradients"
    OPTIMIZER_STATE = "optimizer_state"
    ACTIVATIONS = "activations"
    TEMPORARIES = "temporaries"
    HOST = "host"
    """Not device memory on the target (the optimizer's CPU step counters)."""
    WORKSPACES = "workspaces"
    """A library's own buffers allocated through PyTorch (cuDNN workspaces, dropout state)."""


@dataclass(kw_only=True, slots=True)
class StepTrace:
    """What a traced step allocated and freed, in order, with what each storage was."""

    events: list[Event]
    workspaces: list[WorkspaceEvent]
    categories: dict[int, Category]
    """Category of each storage key that is not a plain temporary/activation."""
    description: Description
    loss_note: LossNote
    assumptions: list[DataCheck]
    attention: dict[SdpaBackend, int]
    parameter_count: int
    trainable_count: int
    ops: int
    notes: list[UntestedTorch] = field(default_factory=list)
    replayed_passes: bool = False
    """Whether later iterations re-emitted the first iteration's forward/backward events."""
    attention_calls: frozenset[SdpaCall] = frozenset()
    """The distinct SDPA calls routed to a CUDA kernel (what the capability decided)."""
    passes: tuple[RecordedPass, ...] = ()
    """The first iteration's forward/backward passes (events[start:end]), when replayable: a
    trace of the same step with another optimizer can copy them (`trace_step(passes_from=)`)."""
    tokens_per_sample: int | None = None
    trainable_tensors: int = 0
    """Trainable parameter tensors (the optimizer's host work is per tensor)."""
    costs: StepCosts | None = field(default=None, repr=False, compare=False)
    """What each op of the step costs (FLOPs, bytes, kernels), for its run time."""
    dtypes: StepDtypes | None = None
    """The dtypes of the weights, gradients and optimizer state."""
    model_class: ModelClass | None = None
    """The transformers class the model was built as, and why (None for a plain module)."""
    reference_keys: frozenset[int] = frozenset()
    """The storage keys of a DPO reference copy's parameters (none without one)."""
    reference_itemsize: int = 0
    """Bytes per element of the reference copy as built, before a pure-bf16 step's cast."""
    stamp: StampNote | None = field(default=None, compare=False, repr=False)
    """Whether the trace was stamped from traces of a few layers (`trainfit.trace.stamp`),
    or why not."""
    store_key: str | None = field(default=None, compare=False, repr=False)
    """What the trace is a function of (`trainfit.trace.store.trace_key`); None when that
    cannot be written down."""
    replays: dict[object, object] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """What later layers work out from this trace, kept by what it depends on: its allocator
    replays (`trainfit.memory.replay`), its sizes on one rank (`trainfit.distributed.memory`).
    A plan replays one trace many times, often with the same sizes. Not an argument: a copy
    made with `dataclasses.replace` (other events) starts empty."""
    _names: list[str | None] | None = field(default=None, init=False, repr=False, compare=False)

    def category_names(self) -> list[str | None]:
        """Per event, the category value of the storage it allocates (None for a free or a
        host storage); computed once (replays read it many times)."""
        if self._names is None or len(self._names) != len(self.events):
            self._names = [
                None
                if not event.alloc
                else (None if (c := self.category(event)) is Category.HOST else c.value)
                for event in self.events
            ]
        return self._names

    def category(self, event: Event) -> Category:
        """Category of the storage an allocation event created."""
        known = self.categories.get(event.key)
        if known is not None:
            return known
        return Category.ACTIVATIONS if event.phase is Phase.FORWARD else Category.TEMPORARIES


class _ScalerStandIn:
    """torch.amp.GradScaler's memory behaviour without reading the device.

    NB: the real scaler syncs on `found_inf.item()`; so does this one (for the step time), but
    the step always happens (no inf).
    """

    def __init__(self) -> None:
        # NB: the real scaler makes these two 4-byte tensors in its first scale() call; made up
        # front here, so that the first forward/backward pass leaves only gradients behind and
        # the steady iteration can be replayed (a 512-byte block moves earlier in the trace).
        self._scale: torch.Tensor | None = torch.full((), 2.0**16, dtype=torch.float32)
        self._growth = torch.full((), 0, dtype=torch.int32)
        self._unscaled = False

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self._scale

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        if self._unscaled or self._scale is None:
            return
        inv = self._scale.double().reciprocal().float()
        found_inf = torch.full((1,), 0.0, dtype=torch.float32)
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        if grads:
            torch._foreach_mul_(grads, inv)
        self._found_inf = found_inf
        self._unscaled = True

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        self.unscale_(optimizer)
        # NB: the real scaler reads found_inf back before stepping (a device sync: the host
        # waits for backward to finish); the answer is ignored here, the step always happens
        self._found_inf.item()
        optimizer.step()

    def update(self) -> None:
        self._unscaled = False
        self._found_inf = None


def _apply_order(
    module: nn.Module, after: Callable[[nn.Module], Iterator[torch.Tensor]] | None = None
) -> Iterator[torch.Tensor]:
    """Parameters and buffers in the order `module.to(device)` copies them (children first);
    `after` yields what a module's own `_apply` then allocates (cuDNN's flat RNN weights)."""
    for child in module.children():
        yield from _apply_order(child, after)
    for p in module._parameters.values():
        if p is not None:
            yield p
    for b in module._buffers.values():
        if b is not None:
            yield b
    if after is not None:
        yield from after(module)


def trace_step(
    spec: TrainSpec,
    compute_capability: tuple[int, int] = (9, 0),
    iterations: int = 2,
    target: Target | None = None,
    reuse_passes: bool = True,
    passes_from: StepTrace | None = None,
) -> StepTrace:
    """Trace `iterations` training iterations of `spec` as `target` would run them (default:
    a CUDA device of `compute_capability`).

    `passes_from` is a trace of the same step, target and micro-batch with another optimizer:
    its forward/backward passes are copied instead of traced again (only the optimizer steps
    are traced), when it recorded them. The caller vouches that only the optimizer differs.

    A step traced before with the same arguments, code and versions is read back from disk
    instead (`trainfit.trace.store`; off with `TRAINFIT_NO_CACHE=1`).
    """
    tell(Part.TRACE, spec.model, batch=spec.batch)
    target = target or Target.cuda(compute_capability)
    copies = passes_from is not None and reuse_passes and bool(passes_from.passes)
    key = store.trace_key(
        spec,
        target,
        iterations,
        reuse_passes,
        copies,
        passes_from.store_key if passes_from is not None else None,
    )
    if key is not None and store.enabled():
        kept = store.load(key)
        if kept is not None:
            return kept
    trace = _made(spec, target, iterations, reuse_passes, passes_from)
    trace.store_key = key
    if key is not None and store.enabled():
        store.save(key, trace)
    return trace


def _made(
    spec: TrainSpec,
    target: Target,
    iterations: int,
    reuse_passes: bool,
    passes_from: StepTrace | None,
) -> StepTrace:
    """`trace_step`'s trace, made: stamped from traces of a few layers where the model's
    layers allow (`trainfit.trace.stamp`), else traced whole."""
    if passes_from is not None:
        note = StampNote(None, Unstamped.COPIED_PASSES)
    elif not stamping():
        note = StampNote(None, Unstamped.OFF)
    else:

        def trace_at(layers: int) -> tuple[StepTrace, list]:
            trace, log = _trace(spec, target, iterations, reuse_passes, None, layers)
            return trace, log.entries()

        trace, note = stamped(spec, trace_at)
        if trace is not None:
            trace.stamp = note
            return trace
    trace = _trace(spec, target, iterations, reuse_passes, passes_from)[0]
    trace.stamp = note
    return trace


def _trace(
    spec: TrainSpec,
    target: Target,
    iterations: int,
    reuse_passes: bool,
    passes_from: StepTrace | None,
    layers: int | None = None,
) -> tuple[StepTrace, CostLog]:
    """`trace_step`'s trace, made whole (with `layers` decoder layers instead of the model's
    own, when given), and its cost log (whose entries a stamped step is made from)."""
    torch_note = check_torch()
    program = build_program(spec, "meta", layers)
    apply_settings(program, spec)
    reference, reference_itemsize = _reference(program)
    if spec.precision is Precision.PURE_BF16:
        program.model.to(torch.bfloat16)
    autocast_dtype = spec.precision.autocast_dtype
    with tracing(program.model, target, autocast_dtype, transformers=program.is_hf) as tracer:
        recorder, rules = tracer.recorder, tracer.rules
        trainable = [p for p in program.model.parameters() if p.requires_grad]
        kind = effective_optimizer(spec.optimizer, spec.lora)
        optimizer = traced_optimizer(kind, trainable, rules.foreach, spec.optimizer_path)
        scaler = _ScalerStandIn() if needs_scaler(spec.precision) else None
        rig = StepRig(
            program=program, optimizer=optimizer, autocast=rules.autocast, scaler=scaler, spec=spec
        )
        flatten = tracer.cudnn.flatten_weights if tracer.cudnn is not None else None
        weights = tracer.track_weights(_apply_order(program.model, flatten))
        categories = dict.fromkeys(weights, Category.PARAMETERS)
        reference_keys = frozenset(
            k for k in (recorder.key_of(p) for p in reference) if k is not None
        )
        batch = program.make_batch(torch.device("cpu"), False)
        mark = _marker(recorder, trainable, categories)
        reuse = PassReuse(recorder, rig, batch, mark, trainable) if reuse_passes else None
        copied = passes_from is not None and reuse is not None and bool(passes_from.passes)
        source = passes_from if copied else None
        advice = "check the inputs, precision and loss given for this model"
        with tracer.failures("the training step", advice):
            replayed, attention = _iterate(tracer, rig, batch, mark, reuse, iterations, source)
        # NB: a step function that casts the model (`model.to(dtype)`) leaves its parameters
        # in new storages: the ones they hold after the step are the parameters
        categories.update(_parameter_categories(recorder, program.model))
        dtypes = StepDtypes.of(program.model, kind.value)
        categories.update(_state_categories(recorder, optimizer))
        categories.update(dict.fromkeys(tracer.library_keys(), Category.WORKSPACES))
        passes = reuse.exported() if reuse is not None else ()
        del batch, rig, optimizer, reuse
    if source is not None:
        attention = _copied_notes(source, recorder)
    trace = StepTrace(
        events=recorder.events,
        workspaces=recorder.workspaces,
        categories=categories,
        description=program.description,
        loss_note=program.loss_note,
        assumptions=recorder.assumptions,
        attention=attention,
        parameter_count=_count(program, trainable_only=False),
        trainable_count=_count(program, trainable_only=True),
        ops=recorder.ops,
        notes=[torch_note] if torch_note else [],
        replayed_passes=replayed,
        attention_calls=source.attention_calls if source is not None else rules.attention_calls(),
        passes=passes,
        tokens_per_sample=program.tokens_per_sample,
        trainable_tensors=len(trainable),
        costs=recorder.costs.step_costs(source.costs if source is not None else None),
        dtypes=dtypes,
        model_class=program.model_class,
        reference_keys=reference_keys,
        reference_itemsize=reference_itemsize,
    )
    return trace, recorder.costs


def _reference(program: StepProgram) -> tuple[list[nn.Parameter], int]:
    """The reference copy's parameters (a DPO step's frozen model) and their item size (0
    when there is none)."""
    reference = [p for p in program.model.parameters() if id(p) in _reference_ids(program)]
    return reference, reference[0].dtype.itemsize if reference else 0


def _copied_notes(source: StepTrace, recorder: Recorder) -> dict[SdpaBackend, int]:
    """What the copied passes of `source` would have said about themselves: their attention
    (returned) and their assumptions (put first in the recorder's)."""
    recorder.assumptions[:0] = [a for a in source.assumptions if a not in recorder.assumptions]
    return dict(source.attention)


def _marker(
    recorder: Recorder, trainable: list[nn.Parameter], categories: dict[int, Category]
) -> Callable[[Phase], None]:
    """What the step calls at each phase boundary: the phase is recorded, and at the
    optimizer step the gradients' storages are marked as gradients."""

    def mark(phase: Phase) -> None:
        if phase is Phase.OPTIMIZER:
            for p in trainable:
                if p.grad is not None:
                    key = recorder.key_of(p.grad)
                    if key is not None:
                        categories[key] = Category.GRADIENTS
        recorder.phase = phase

    return mark


def _iterate(
    tracer: Tracer,
    rig: StepRig,
    batch: Batch,
    mark: Callable[[Phase], None],
    reuse: PassReuse | None,
    iterations: int,
    source: StepTrace | None,
) -> tuple[bool, dict[SdpaBackend, int]]:
    """Run the iterations: the first records its passes (or copies `source`'s), a later one
    replays them where it can. Returns whether one replayed, and the first's attention calls."""
    recorder = tracer.recorder
    replayed = False
    attention: dict[SdpaBackend, int] = {}
    for i in range(iterations):
        recorder.iteration = i
        micro_batch_pass = None
        if reuse is not None:
            if i == 0 and source is not None:
                micro_batch_pass = reuse.copying(source.events, source.passes)
            elif i == 0:
                micro_batch_pass = reuse.recording()
            elif reuse.why_not() is None:
                micro_batch_pass = reuse.replaying()
                replayed = True
        run_iteration(
            rig,
            batch,
            mark,
            micro_batches=min(rig.spec.grad_accum, 2),
            micro_batch_pass=micro_batch_pass,
        )
        recorder.phase = Phase.SETUP
        if i == 0:
            attention = tracer.rules.attention_chosen()  # per step, not per trace
    return replayed, attention


def _parameter_categories(recorder: Recorder, model: nn.Module) -> dict[int, Category]:
    keys = (recorder.key_of(p) for p in model.parameters())
    return {key: Category.PARAMETERS for key in keys if key is not None}


def _state_categories(recorder: Recorder, optimizer: torch.optim.Optimizer) -> dict[int, Category]:
    """The optimizer state's storages: device state, and the step counters (on the host, unless
    the optimizer is fused or capturable: PyTorch then keeps them on the parameter's device)."""
    categories = {}
    for group in optimizer.param_groups:
        on_device = bool(group.get("fused") or group.get("capturable"))
        for p in group["params"]:
            for name, value in optimizer.state.get(p, {}).items():
                if isinstance(value, torch.Tensor):
                    key = recorder.key_of(value)
                    if key is not None:
                        host = name == "step" and not on_device
                        categories[key] = Category.HOST if host else Category.OPTIMIZER_STATE
    return categories


def _reference_ids(program: StepProgram) -> set[int]:
    from trainfit.models.preference import reference_parameter_ids

    return reference_parameter_ids(program.model)


def _count(program: StepProgram, trainable_only: bool) -> int:
    from trainfit.models.preference import reference_parameter_ids

    # NB: a DPO reference is not the model's
    total, trainable = parameter_counts(
        program.model, exclude=reference_parameter_ids(program.model)
    )
    return trainable if trainable_only else total
