"""Trace training iterations of a spec without weights, as a CUDA target would run them.

The model is built on the meta device, its parameters become fake CPU tensors (so that they
carry the autocast dispatch key), and two iterations run under FakeTensorMode with the
`Recorder` underneath: the first creates optimizer state, the second is the steady state.
CUDA's choices are injected: its autocast policy, the attention kernel it would pick, the
foreach optimizer path it defaults to, and a GradScaler that never reads the device. A CPU
target (`Target.cpu()`) injects nothing: the step runs as stock CPU PyTorch runs it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.errors import TraceError, TrainfitError
from trainfit.models.lora import effective_optimizer, parameter_counts
from trainfit.models.source import StepProgram, build_program
from trainfit.spec import Precision, TrainSpec
from trainfit.trace.compat import check_torch, internal_moved
from trainfit.trace.costs import MODULE_CALL, StepCosts
from trainfit.trace.kernels.attention import SdpaBackend, SdpaCall
from trainfit.trace.kernels.cudnn_conv import CudnnConv
from trainfit.trace.kernels.cudnn_rnn import LIBRARY_OP, CudnnLstm
from trainfit.trace.optimizers import make_optimizer
from trainfit.trace.recorder import Event, Recorder, WorkspaceEvent
from trainfit.trace.reuse import PassReuse, RecordedPass
from trainfit.trace.target import Target, TargetKind
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
    description: str
    loss_note: str
    assumptions: list[str]
    attention: dict[SdpaBackend, int]
    parameter_count: int
    trainable_count: int
    ops: int
    notes: list[str] = field(default_factory=list)
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


def _fakeify(model: nn.Module, mode: FakeTensorMode) -> None:
    """Swap meta parameters and buffers for fake CPU tensors, keeping ties."""
    converter = mode.fake_tensor_converter
    cpu = torch.device("cpu")
    swapped: dict[int, Any] = {}
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None:
                continue
            if id(param) not in swapped:
                fake = converter.from_meta_and_device(mode, param.data, cpu)
                swapped[id(param)] = nn.Parameter(fake, requires_grad=param.requires_grad)
            module._parameters[name] = swapped[id(param)]
        for name, buf in list(module._buffers.items()):
            if buf is None:
                continue
            if id(buf) not in swapped:
                swapped[id(buf)] = converter.from_meta_and_device(mode, buf, cpu)
            module._buffers[name] = swapped[id(buf)]


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


@contextlib.contextmanager
def _not_tracing_for_transformers() -> Iterator[None]:
    """Keep transformers on its eager code paths while it sees fake tensors.

    NB: transformers treats a FakeTensor as "tracing" (torch.export) and then builds explicit
    attention masks instead of `is_causal=True`, which steers SDPA away from flash attention.
    A real run takes the eager path, so the trace must too.
    """
    try:
        from transformers.utils import import_utils
    except ImportError:
        yield
        return
    original = getattr(import_utils, "is_fake_tensor", None)
    if original is None:
        yield
        return
    import_utils.is_fake_tensor = lambda x: False
    try:
        yield
    finally:
        import_utils.is_fake_tensor = original


@contextlib.contextmanager
def _module_tracking(recorder: Recorder, model: nn.Module) -> Iterator[None]:
    names = {id(m): n for n, m in model.named_modules()}
    stack: list[str] = []

    def pre(module: nn.Module, args: Any) -> None:
        stack.append(names.get(id(module)) or type(module).__name__)
        recorder.module_path = stack[-1]
        recorder.charge(MODULE_CALL)

    def post(module: nn.Module, args: Any, out: Any) -> None:
        if stack:
            stack.pop()
        recorder.module_path = stack[-1] if stack else ""

    h1 = nn.modules.module.register_module_forward_pre_hook(pre)
    h2 = nn.modules.module.register_module_forward_hook(post)
    try:
        yield
    finally:
        h1.remove()
        h2.remove()


@contextlib.contextmanager
def traced_failures(recorder: Recorder, what: str, advice: str) -> Iterator[None]:
    """Turn a failure of the model's code under the tracer into one TraceError naming the module
    it happened in: an op without a data-free implementation, or `what` failing (with `advice`).
    trainfit's own errors pass through."""
    try:
        yield
    except TrainfitError:
        raise
    except NotImplementedError as exc:
        where = f" in module {recorder.module_path!r}" if recorder.module_path else ""
        raise TraceError(
            f"an op{where} has no implementation the tracer can run without data ({exc}); "
            "measure this model on the device instead (trainfit measure)"
        ) from exc
    except (RuntimeError, TypeError, ValueError, AttributeError) as exc:
        where = f" in module {recorder.module_path!r}" if recorder.module_path else ""
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise TraceError(f"{what} failed{where}: {type(exc).__name__}: {first}; {advice}") from exc


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
    """
    torch_note = check_torch()
    program = build_program(spec, "meta")
    apply_settings(program, spec)
    if spec.precision is Precision.PURE_BF16:
        program.model.to(torch.bfloat16)
    try:
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        _fakeify(program.model, mode)
    except (AttributeError, ImportError) as exc:
        raise internal_moved(exc) from exc
    trainable = [p for p in program.model.parameters() if p.requires_grad]
    recorder = Recorder()
    autocast_dtype = spec.precision.autocast_dtype
    target = target or Target.cuda(compute_capability)
    rules = target.rules(autocast_dtype)
    cudnn = CudnnLstm(recorder) if target.kind is TargetKind.CUDA else None
    with contextlib.ExitStack() as stack:
        # NB: frees are recorded when a storage's last reference goes; a collection of
        # reference cycles mid-trace would add frees at a moment that depends on the process's
        # allocation history, so traces of one step could differ: the collector waits
        if gc.isenabled():
            gc.disable()
            stack.callback(gc.enable)
        try:
            stack.enter_context(rules.installed())
        except (AttributeError, ImportError) as exc:
            raise internal_moved(exc) from exc
        if cudnn is not None:
            stack.enter_context(cudnn.installed())
            stack.enter_context(CudnnConv(recorder).installed())
        stack.enter_context(mode)
        stack.enter_context(recorder)
        stack.enter_context(_module_tracking(recorder, program.model))
        if program.is_hf:
            stack.enter_context(_not_tracing_for_transformers())
        kind = effective_optimizer(spec.optimizer, spec.lora)
        optimizer = make_optimizer(kind, trainable, foreach=rules.foreach)
        rig = StepRig(
            program=program,
            optimizer=optimizer,
            autocast=rules.autocast,
            scaler=_ScalerStandIn() if needs_scaler(spec.precision) else None,
            spec=spec,
        )
        categories: dict[int, Category] = {}
        seen: set[int] = set()
        flatten = cudnn.flatten_weights if cudnn is not None else None
        for tensor in _apply_order(program.model, flatten):
            storage_id = id(tensor.untyped_storage())
            if storage_id in seen:
                continue
            seen.add(storage_id)
            key = recorder.track(tensor, "model.to(device)")
            if key is not None:
                categories[key] = Category.PARAMETERS
        batch = program.make_batch(torch.device("cpu"), False)

        def mark(phase: Phase) -> None:
            if phase is Phase.OPTIMIZER:
                for p in trainable:
                    if p.grad is not None:
                        key = recorder.key_of(p.grad)
                        if key is not None:
                            categories[key] = Category.GRADIENTS
            recorder.phase = phase

        reuse = PassReuse(recorder, rig, batch, mark, trainable) if reuse_passes else None
        copied = passes_from.passes if passes_from is not None and reuse is not None else ()
        replayed = False
        attention_calls: dict[SdpaBackend, int] = {}
        with traced_failures(
            recorder,
            "the training step",
            "check the inputs, precision and loss given for this model",
        ):
            for i in range(iterations):
                recorder.iteration = i
                micro_batch_pass = None
                if reuse is not None:
                    if i == 0 and copied:
                        micro_batch_pass = reuse.copying(passes_from.events, copied)
                    elif i == 0:
                        micro_batch_pass = reuse.recording()
                    elif reuse.why_not() is None:
                        micro_batch_pass = reuse.replaying()
                        replayed = True
                run_iteration(
                    rig,
                    batch,
                    mark,
                    micro_batches=min(spec.grad_accum, 2),
                    micro_batch_pass=micro_batch_pass,
                )
                recorder.phase = Phase.SETUP
                if i == 0:
                    attention_calls = rules.attention_chosen()  # per step, not per trace
        for state in optimizer.state.values():
            for name, value in state.items():
                if isinstance(value, torch.Tensor):
                    key = recorder.key_of(value)
                    if key is not None:
                        categories[key] = (
                            Category.HOST if name == "step" else (Category.OPTIMIZER_STATE)
                        )
        for event in recorder.events:
            if event.alloc and event.op.startswith(LIBRARY_OP):
                categories[event.key] = Category.WORKSPACES
        passes = reuse.exported() if reuse is not None else ()
        del batch, rig, optimizer, reuse
    # NB: frees after this (a cycle the garbage collector breaks later) are not the step's
    recorder.finish()
    if copied and passes_from is not None:
        # NB: what the copied passes would have said about themselves
        attention_calls = dict(passes_from.attention)
        recorder.assumptions[:0] = [
            a for a in passes_from.assumptions if a not in recorder.assumptions
        ]
    return StepTrace(
        events=recorder.events,
        workspaces=recorder.workspaces,
        categories=categories,
        description=program.description,
        loss_note=program.loss_note,
        assumptions=recorder.assumptions,
        attention=attention_calls,
        parameter_count=_count(program, trainable_only=False),
        trainable_count=_count(program, trainable_only=True),
        ops=recorder.ops,
        notes=[torch_note] if torch_note else [],
        replayed_passes=replayed,
        attention_calls=passes_from.attention_calls
        if copied and passes_from is not None
        else rules.attention_calls(),
        passes=passes,
        tokens_per_sample=program.tokens_per_sample,
        trainable_tensors=len(trainable),
        costs=recorder.costs.step_costs(
            passes_from.costs if copied and passes_from is not None else None
        ),
    )


def _count(program: StepProgram, trainable_only: bool) -> int:
    from trainfit.models.preference import reference_parameter_ids

    # NB: a DPO reference is not the model's
    total, trainable = parameter_counts(
        program.model, exclude=reference_parameter_ids(program.model)
    )
    return trainable if trainable_only else total
