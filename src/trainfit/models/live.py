"""Live models: a module already in the user's process, seen by the estimator as an import path.

`register_model(model, sample)` keeps a *meta copy* of the model (the same modules, shapes,
dtypes and `requires_grad`, no weights) and returns the import paths that resolve to it:
`trainfit.models.live:model_3` is a factory returning a fresh meta copy, and
`trainfit.models.live:step_3` a step function `(model, batch dict) -> loss` that rebuilds the
user's batch (a tensor, a tuple or a dict of tensors) and runs the user's forward and loss.
A `TrainSpec(model=..., step_fn=..., inputs=...)` built from them then goes through
`estimate`, `max_micro_batch` and `plan` unchanged.

The copy is `copy.deepcopy(model, memo)` with every parameter, buffer and tensor attribute
mapped to a meta tensor of its shape and dtype in `memo`, and so are the tensors inside the
lists, tuples, dicts and sets a module keeps in its attributes and inside the objects of its
hooks (a few levels deep): nothing of the weights is copied.

The registry holds an entry only while its `Registration` lives (the registry keeps weak
references): `registered(...)` yields one and drops it on an error; autofit keeps it in the
`Fit`, so that `fit.spec` resolves while the fit lives. The step keeps the sample's structure
(its keys and non-tensor values), never its tensors.

`given_spec(...)` is the one way a public function takes either a TrainSpec or its fields
as keyword arguments (a live model among them); with `weights=True` (the functions that run
real steps, `find_max_batch` and `measure_latency`) the factory builds a copy *with* the
model's weights wherever it is not building on the meta device, so the user's own module is
never trained nor moved.

Outputs name a live model by its class (`models.live_names`: `Net (live module)`), never by
its import path, which resolves in this process only.

Known limitations: the copy is taken once, when registered; tensors nested deeper than the
walk looks (or held by objects other than a module's attributes and hooks) are deep-copied
with their data; the batch must be one tensor, a
tuple/list of tensors or a dict whose tensor values all have the batch first (other values of
a dict are passed as they are); nested structures are not split. A model that cannot be
deep-copied (open handles, C++ modules) raises ModelLoadError.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import itertools
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainfit.errors import (
    USER_CODE_ERRORS,
    ModelLoadError,
    SpecError,
    TraceError,
    TrainfitError,
    UnknownNameError,
    check_argument,
    raised_in_user_code,
)
from trainfit.models.live_names import PREFIX, is_live, name_live_model
from trainfit.models.program import hf_checkpointing, hf_checkpointing_disable
from trainfit.models.source import default_loss
from trainfit.spec import InputSpec, TrainSpec

CHECKPOINT_MARK = "_trainfit_checkpoint"
"""Attribute set on a forward that autofit wrapped in checkpointing: meta copies drop it."""

_LIVE: weakref.WeakValueDictionary[str, Registration] = weakref.WeakValueDictionary()
"""`model_N` / `step_N` -> the registration holding them (gone with it)."""
_KEYS = itertools.count(1)

UserBatch = torch.Tensor | tuple[Any, ...] | list[Any] | Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class LiveModel:
    """A registered live model: the import paths and inputs a TrainSpec takes."""

    model_path: str
    """`trainfit.models.live:model_N`: a factory returning a meta copy."""
    step_path: str
    """`trainfit.models.live:step_N`: `(model, batch dict) -> loss`."""
    inputs: tuple[InputSpec, ...]
    """The sample batch's tensors, batch dimension "B"."""
    sample_rows: int
    """Rows of the sample batch."""
    is_hf: bool
    """A transformers PreTrainedModel."""
    registration: Registration = field(repr=False, compare=False)
    """Keeps the import paths resolvable while it lives."""


class Registration:
    """The factory and step behind a live model's import paths; the registry forgets them
    when this object is dropped (or `forget()` is called)."""

    __slots__ = ("__weakref__", "factory", "keys", "step")

    def __init__(
        self,
        key: int,
        factory: Callable[[], nn.Module],
        step: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor] | None,
    ) -> None:
        self.factory: Callable[[], nn.Module] | None = factory
        self.step: Callable[..., torch.Tensor] | None = step
        self.keys = (f"model_{key}", f"step_{key}")
        for name in self.keys:
            _LIVE[name] = self

    def forget(self) -> None:
        """Remove the entries and drop the copy and the step (with the loss function)."""
        for name in self.keys:
            if _LIVE.get(name) is self:
                del _LIVE[name]
        self.factory = self.step = None


def registered_names() -> list[str]:
    """The `model_N` / `step_N` names that resolve now."""
    return sorted(_LIVE.keys())


def __getattr__(name: str) -> Any:
    # NB: `models.imports.resolve` finds `trainfit.models.live:model_N` through this hook
    holder = _LIVE.get(name)
    if holder is not None:
        value = holder.factory if name.startswith("model_") else holder.step
        if value is not None:
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_hf_model(model: nn.Module) -> bool:
    """Whether `model` is a transformers PreTrainedModel (without importing transformers)."""
    return any(
        cls.__name__ == "PreTrainedModel" and cls.__module__.startswith("transformers")
        for cls in type(model).__mro__
    )


def meta_copy(model: nn.Module) -> nn.Module:
    """A copy of `model` on the meta device: same structure, shapes, dtypes and requires_grad,
    no weights. Forwards wrapped by autofit's checkpointing and transformers' own gradient
    checkpointing are turned off in the copy (the spec says whether to checkpoint)."""
    memo: dict[int, Any] = {}
    for module in model.modules():
        for tensor in itertools.chain(module._parameters.values(), module._buffers.values()):
            _to_meta(tensor, memo)
        for name, value in vars(module).items():
            if name not in ("_parameters", "_buffers", "_modules"):
                _nested_to_meta(value, memo, 4)
    return _copied(model, memo, "to the meta device for the estimate")


def weights_copy(model: nn.Module) -> nn.Module:
    """A copy of `model` with its weights, on the model's own devices, without autofit's or
    transformers' checkpointing (as `meta_copy`): what a real step is measured on."""
    return _copied(model, {}, "with its weights to measure it")


def _copied(model: nn.Module, memo: dict[int, Any], what: str) -> nn.Module:
    try:
        copied = copy.deepcopy(model, memo)
    except Exception as exc:
        raise ModelLoadError(
            f"cannot copy {type(model).__name__} {what}: {type(exc).__name__}: {exc}"
        ) from exc
    for module in copied.modules():
        forward = vars(module).get("forward")
        if forward is not None and getattr(forward, CHECKPOINT_MARK, False):
            del module.forward
    if is_hf_model(copied) and hf_checkpointing(copied):
        hf_checkpointing_disable(copied)
    return copied


def _to_meta(tensor: Any, memo: dict[int, Any]) -> None:
    if not isinstance(tensor, torch.Tensor) or id(tensor) in memo:
        return
    meta = torch.empty_like(tensor, device="meta")
    if isinstance(tensor, nn.Parameter):
        meta = nn.Parameter(meta, requires_grad=tensor.requires_grad)
    memo[id(tensor)] = meta


def _nested_to_meta(value: Any, memo: dict[int, Any], depth: int) -> None:
    """Map the tensors in `value` (a tensor, a container of them, or an object such as a hook
    keeping them in its attributes) to meta tensors in `memo`, `depth` levels deep."""
    if isinstance(value, torch.Tensor):
        _to_meta(value, memo)
        return
    if depth <= 0 or isinstance(value, (nn.Module, str, bytes, int, float, bool, type)):
        return
    if isinstance(value, Mapping):
        children: Any = value.values()
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = value
    elif inspect.isfunction(value) or inspect.ismethod(value) or inspect.isbuiltin(value):
        return
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        children = vars(value).values()
    else:
        return
    for child in children:
        _nested_to_meta(child, memo, depth - 1)


@contextlib.contextmanager
def registered(
    model: nn.Module,
    sample: UserBatch,
    loss_fn: Callable[..., torch.Tensor] | None = None,
    step_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
    trainable_all: bool = False,
    weights: bool = False,
) -> Iterator[LiveModel]:
    """`register_model(...)` for a block: its entries are forgotten when the block raises;
    on success they live as long as the yielded LiveModel's `registration`."""
    live = register_model(model, sample, loss_fn, step_fn, trainable_all, weights)
    try:
        yield live
    except BaseException:
        live.registration.forget()
        raise


def registration_of(path: str) -> Registration | None:
    """The registration behind a live model's import path (None for any other path, or one
    forgotten): kept beside a result, it keeps the path resolvable while the result lives."""
    return _LIVE.get(path.partition(":")[2]) if is_live(path) else None


_EXAMPLES = {"loss": "F.cross_entropy", "step_fn": "my_step"}
"""A callable to name in the errors of `live_problems`."""


def live_problems(fields: Mapping[str, Any], sample: Any, call: str = "estimate") -> list[str]:
    """What is wrong with a live model among TrainSpec `fields` (`model` an `nn.Module`) and
    its `sample`, each a line whose example is `call(...)`; none for a model given by name
    and no sample."""
    model = fields.get("model")
    if not isinstance(model, nn.Module):
        if sample is not None:
            return ["sample is the batch of a live model: give model=<an nn.Module>"]
        return []
    if sample is None:
        return [
            f"model is a live {type(model).__name__}: give its batch too, "
            f"e.g. {call}(model=module, sample=torch.randn(8, 4))"
        ]
    problems = [
        f"{name} of a live model is the function itself, got {type(value).__name__} "
        f"{value!r}: pass the callable, e.g. {name}={_EXAMPLES[name]}"
        for name in ("loss", "step_fn")
        if (value := fields.get(name)) is not None and not callable(value)
    ]
    if "inputs" in fields:
        problems.append("inputs of a live model come from its sample: drop inputs")
    return problems


@contextlib.contextmanager
def live_fields(
    fields: Mapping[str, Any],
    sample: UserBatch | None,
    *,
    call: str = "estimate",
    weights: bool = False,
) -> Iterator[dict[str, Any]]:
    """TrainSpec fields with a live model in place of an import path: `model` an `nn.Module`
    run on `sample` (`loss` and `step_fn` may then be callables, see `register_model`),
    registered for the block; the micro-batch defaults to the sample's rows. Fields without
    a live model are returned as they are (a `sample` without one is an error). `call` names
    the function in the errors' examples; `weights` as for `register_model`."""
    problems = live_problems(fields, sample, call)
    if problems:
        raise SpecError(problems)
    model = fields.get("model")
    if not isinstance(model, nn.Module) or sample is None:
        yield dict(fields)
        return
    loss, step = fields.get("loss"), fields.get("step_fn")
    with registered(model, sample, loss, step, weights=weights) as live:
        out = {k: v for k, v in fields.items() if k not in ("loss", "step_fn")}
        out.update(model=live.model_path, step_fn=live.step_path, inputs=live.inputs)
        out.setdefault("batch", live.sample_rows)
        yield out


@contextlib.contextmanager
def given_spec(
    function: str,
    spec: TrainSpec | nn.Module | None,
    fields: Mapping[str, Any],
    sample: UserBatch | None,
    *,
    weights: bool = False,
    excluded: Collection[str] = (),
    parameters: Collection[str] = (),
) -> Iterator[TrainSpec]:
    """The TrainSpec a public `function` was given: `spec`, or one made of its fields given
    as keyword arguments, a live model among them registered for the block (`live_fields`);
    a live module in `spec`'s place is the model (`function(net, sample=batch)`).
    `excluded` are the TrainSpec fields that `function` does not take (it has its own
    `parameters`, e.g. `devices` for `device`). One line for both at once, for a `spec` that
    is no TrainSpec, and for an argument that is no field (with the names it may have meant)."""
    if isinstance(spec, nn.Module) and "model" not in fields:
        spec, fields = None, {"model": spec, **fields}
    if spec is not None and (fields or sample is not None):
        raise SpecError(["give either a TrainSpec or keyword arguments, not both"])
    known = {f.name for f in dataclasses.fields(TrainSpec)} - set(excluded)
    for name in fields:
        if name not in known:
            hint = "the fields of a TrainSpec: help(trainfit.TrainSpec)"
            choices = [*known, "sample", *parameters]
            raise UnknownNameError(f"{function} argument", name, choices, hint)
    if spec is None:
        with live_fields(fields, sample, call=function, weights=weights) as given:
            yield TrainSpec(**given)
        return
    hint = f"give one, or its fields as keyword arguments: {function}(model=module, sample=batch)"
    check_argument(function, "spec", spec, TrainSpec, hint)
    yield spec


def register_model(
    model: nn.Module,
    sample: UserBatch,
    loss_fn: Callable[..., torch.Tensor] | None = None,
    step_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
    trainable_all: bool = False,
    weights: bool = False,
) -> LiveModel:
    """Register a meta copy of `model` and its step; return the paths a TrainSpec takes.

    `step_fn(model, batch)` gets the batch in the user's own structure. Without it, the
    forward is `model(x)` for a tensor, `model(*batch[:-1])` for a tuple (the last item is the
    target) and `model(**batch)` for a dict; the loss is `loss_fn(output, target)` for a tuple
    and `loss_fn(output, batch)` otherwise, or the output's `.loss` / trainfit's default loss
    without `loss_fn`. `trainable_all` makes every parameter of the copy trainable (a stage
    that names its frozen parameters with `TrainSpec.freeze`). `weights` keeps the model
    itself in the registration: the factory then builds a `weights_copy` wherever the default
    device is not the meta device (a real step), and the meta copy on it.
    """
    if loss_fn is not None and step_fn is not None:
        raise SpecError(["give loss_fn or step_fn, not both: a step function computes its loss"])
    inputs, rows, rebuild = describe_batch(sample, model)
    snapshot = meta_copy(model)
    if trainable_all:
        for p in snapshot.parameters():
            p.requires_grad_(True)
    key = next(_KEYS)

    kept = model if weights else None

    def factory() -> nn.Module:
        if kept is not None and torch.get_default_device().type != "meta":
            return weights_copy(kept)
        return copy.deepcopy(snapshot)

    def step(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        try:
            return run_step(m, rebuild(batch), loss_fn, step_fn)
        except (TrainfitError, NotImplementedError):
            raise  # NB: the tracer words these (an op that failed, one it cannot run)
        except USER_CODE_ERRORS as exc:
            raise TraceError(forward_failure(exc, m, "the sample batch")) from None

    registration = Registration(key, factory, step)
    name_live_model(f"model_{key}", type(model).__name__)
    return LiveModel(
        model_path=f"{PREFIX}model_{key}",
        step_path=f"{PREFIX}step_{key}",
        inputs=inputs,
        sample_rows=rows,
        is_hf=is_hf_model(model),
        registration=registration,
    )


@contextlib.contextmanager
def registered_copy(model: nn.Module) -> Iterator[str]:
    """A meta copy of `model` registered for the block, without a step (what generation
    traces, whose inputs are made from the context asked for): its import path."""
    snapshot = meta_copy(model)
    key = next(_KEYS)
    registration = Registration(key, lambda: copy.deepcopy(snapshot), None)
    name_live_model(f"model_{key}", type(model).__name__)
    try:
        yield f"{PREFIX}model_{key}"
    finally:
        registration.forget()


def run_step(
    model: nn.Module,
    batch: UserBatch,
    loss_fn: Callable[..., torch.Tensor] | None,
    step_fn: Callable[[nn.Module, Any], torch.Tensor] | None,
) -> torch.Tensor:
    """Forward and loss of one batch in the user's structure (see `register_model`)."""
    if step_fn is not None:
        return step_fn(model, batch)
    if isinstance(batch, Mapping):
        output = model(**batch)
        target: Any = batch
    elif isinstance(batch, (tuple, list)):
        output = model(*batch[:-1]) if len(batch) > 1 else model(batch[0])
        target = batch[-1] if len(batch) > 1 else None
    else:
        output = model(batch)
        target = batch
    if loss_fn is None:
        return default_loss(output)
    return loss_fn(output, target) if target is not None else loss_fn(output)


def forward_failure(exc: BaseException, model: nn.Module, what: str) -> str:
    """One line: where in `model` the forward of `what` raised `exc` (the innermost module
    of the traceback), and the error's first line."""
    names = {id(m): n for n, m in model.named_modules()}
    where = ""
    tb = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, nn.Module) and id(owner) in names:
            name = names[id(owner)] or "(the model itself)"
            where = f" in module {name!r} ({type(owner).__name__})"
        tb = tb.tb_next
    return (
        f"the training step of {type(model).__name__} fails on {what}{where}: "
        f"{raised_in_user_code(exc)}"
    )


def describe_batch(
    sample: UserBatch, model: nn.Module
) -> tuple[tuple[InputSpec, ...], int, Callable[[dict[str, torch.Tensor]], UserBatch]]:
    """The InputSpecs of a sample batch, its rows, and how to rebuild the user's structure
    from the dict of tensors the step program makes."""
    if isinstance(sample, torch.Tensor):
        name = _first_argument(model)
        items: list[tuple[str, Any]] = [(name, sample)]
    elif isinstance(sample, (tuple, list)):
        items = [(f"input_{i}", v) for i, v in enumerate(sample)]
    elif isinstance(sample, Mapping):
        items = [(str(k), v) for k, v in sample.items()]
    else:
        raise SpecError(
            [
                f"sample batch is a {type(sample).__name__}: give a tensor, a tuple of tensors "
                "or a dict of tensors (batch dimension first)"
            ]
        )
    tensors = [(k, v) for k, v in items if isinstance(v, torch.Tensor)]
    problems = []
    if not tensors:
        problems.append("sample batch holds no tensor")
    elif not isinstance(sample, Mapping) and len(tensors) != len(items):
        odd = [k for k, v in items if not isinstance(v, torch.Tensor)]
        problems.append(f"sample batch items {odd} are not tensors")
    rows = tensors[0][1].shape[0] if tensors and tensors[0][1].dim() else 0
    for key, tensor in tensors:
        if not key.isidentifier():
            problems.append(f"sample batch key {key!r} is not a Python identifier")
        if tensor.dim() == 0 or tensor.shape[0] != rows:
            shape = tuple(tensor.shape)
            problems.append(
                f"sample batch tensor {key!r} of shape {shape} does not have the batch "
                f"({rows} rows, from {tensors[0][0]!r}) as its first dimension"
            )
    if problems:
        raise SpecError(problems)
    inputs = tuple(_input_spec(k, t) for k, t in tensors)
    constants = {k: v for k, v in items if not isinstance(v, torch.Tensor)}
    keys = [k for k, _ in items]
    structure = type(sample)
    # NB: only the keys, the structure and the non-tensor values are kept, not the sample's
    # tensors (which may be large, or on the GPU)
    del items, tensors

    def rebuild(batch: dict[str, torch.Tensor]) -> UserBatch:
        if issubclass(structure, torch.Tensor):
            return batch[keys[0]]
        if issubclass(structure, (tuple, list)):
            return rebuild_sequence(structure, [batch[k] for k in keys])
        return {k: batch[k] if k in batch else constants[k] for k in keys}

    return inputs, rows, rebuild


def rebuild_sequence(kind: type, items: list[Any]) -> Any:
    """A tuple/list of `kind` holding `items` (a namedtuple takes them as arguments)."""
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):
        return kind(*items)
    return kind(items)


def _input_spec(name: str, tensor: torch.Tensor) -> InputSpec:
    high = None
    if not tensor.dtype.is_floating_point and tensor.dtype != torch.bool and tensor.numel():
        # NB: integer inputs (ids, labels) are drawn in [0, max + 1) for a real run; negative
        # values (an ignore index such as -100) are not reproduced
        high = max(1, int(tensor.max().item()) + 1)
    return InputSpec(name=name, dims=("B", *tensor.shape[1:]), dtype=tensor.dtype, high=high)


def _first_argument(model: nn.Module) -> str:
    try:
        parameters = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    for p in parameters:
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            return p.name
    return "input"
