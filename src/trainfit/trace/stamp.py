"""Layer stamping: the traced step of a decoder stack, made from traces of a few layers.

A transformers decoder whose layers are alike (`STACKS`, with no per-layer variation in its
config) runs the same ops per layer: the traced step of L+1 layers is the one of L layers
with the same blocks inserted (a layer's forward, its backward, its share of each optimizer
list). Here the step is traced at `FIT` layer counts; the insertions between them are found
(`trainfit.trace.periodic`), and the rule that makes a trace at any count from them is
checked against a trace at `CHECK` layers, every field of it (events and their storage keys,
workspaces, categories, passes, the cost log, counts). Only a rule that makes the checked
trace exactly is used for the model's own layer count; anything else traces the whole step
(`Unstamped` says why).

Known limitations: the rule is checked at `CHECK` layers (one more when fitted again), not at
the model's own count, which it makes unchecked: a behaviour that changes only past the
checked count would not be seen (the foreach launches' step at 110 tensors is one, and is
worked out from each list's length for that reason). The model types are allow-listed, and
`tests/trace/test_stamp.py` and `benchmarks/speed/bench_stamp.py` compare stamped and whole
traces at real layer counts. A stack under `MIN_LAYERS` is traced whole (no faster stamped).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.models.source import hf_config
from trainfit.spec import TrainSpec
from trainfit.trace.collector import collector_paused
from trainfit.trace.costs import CostLog, OpCost, foreach_launches
from trainfit.trace.periodic import NEAR, ORDERS, Item, Layout, NoPeriod, fit, resolve
from trainfit.trace.recorder import Event, WorkspaceEvent
from trainfit.trace.reuse import RecordedPass, _GradLayout

STACKS = frozenset({"llama", "mistral", "qwen2", "gpt2"})
"""Model types whose decoder layers were checked to trace alike (`tests/trace/test_stamp.py`)."""
FIT = (2, 3)
"""The layer counts the insertions are found from."""
CHECK = 4
"""The layer count the stamped trace is checked against."""
ATTEMPTS = 2
"""How many times the fit is tried, each one layer up."""
MIN_LAYERS = 20
"""Fewer layers are traced whole: the traces at `FIT` and `CHECK` layers cost about as much
(measured on CPU: GPT-2's 12 layers 0.67 s stamped against 0.38 s whole, a 16-layer 1B
Llama's DPO step 0.77 s against 0.76 s, TinyLlama's 22 layers 0.55-0.84 s against
0.72-0.94 s, a 7B Llama's 32 layers 0.65 s against 1.18 s)."""

Traced = tuple[Any, list[tuple[OpCost, int, Any, int]]]
"""A `StepTrace` and its cost log's entries (`CostLog.entries`)."""


class Unstamped(str, Enum):
    """Why a step was traced whole."""

    OFF = "stamping is off (TRAINFIT_STAMP=0)"
    NOT_A_STACK = "not a transformers model of a catalog row or a config directory"
    USER_CODE = "a user's step function or loss"
    SELECTS_LAYERS = "a freeze pattern, LoRA target or checkpointed module names layers by index"
    MODEL_TYPE = "a model type whose layers are not known to trace alike"
    LAYERS_DIFFER = "its config gives layers of different kinds"
    FEW_LAYERS = "too few layers to gain from stamping"
    COPIED_PASSES = "the passes are copied from another trace"
    FEW_FAILED = "the step of a few layers could not be traced"
    NOT_INSERTIONS = "a trace of more layers is not one of fewer with blocks inserted"
    MISPREDICTED = "the stamped trace differs from the traced one at the checked count"


@dataclass(frozen=True, slots=True)
class StampNote:
    """How a trace was made: stamped (`why` None) from traces at `traced` layer counts, or
    traced whole, and why."""

    layers: int | None
    """The model's layer count (None where it has no decoder stack known here)."""
    why: Unstamped | None
    detail: str = ""
    traced: tuple[int, ...] = ()


SWITCH = "TRAINFIT_STAMP"


def stamping() -> bool:
    """Whether steps are stamped where they can be (`TRAINFIT_STAMP` unset, empty or not
    "0")."""
    return os.environ.get(SWITCH, "") != "0"


def stack_layers(spec: TrainSpec) -> int | Unstamped:
    """The decoder layer count of `spec`'s model when its step can be stamped, else why not."""
    if spec.step_fn or spec.loss:
        return Unstamped.USER_CODE
    if any(_names_layers(pattern) for pattern in _selectors(spec)):
        return Unstamped.SELECTS_LAYERS
    config = hf_config(spec)
    if config is None:
        return Unstamped.NOT_A_STACK
    if getattr(config, "model_type", None) not in STACKS:
        return Unstamped.MODEL_TYPE
    kinds = getattr(config, "layer_types", None)
    if kinds and len(set(kinds)) > 1:
        return Unstamped.LAYERS_DIFFER
    layers = getattr(config, "num_hidden_layers", None)
    if not isinstance(layers, int) or layers < MIN_LAYERS:
        return Unstamped.FEW_LAYERS
    return layers


def _selectors(spec: TrainSpec) -> tuple[str, ...]:
    """The names and globs of `spec` that pick parameters or modules: its freeze patterns,
    LoRA targets and checkpointed modules."""
    targets = spec.lora.targets if spec.lora is not None else ()
    modules = (spec.checkpoint_modules,) if spec.checkpoint_modules else ()
    return (*spec.freeze, *targets, *modules)


def _names_layers(pattern: str) -> bool:
    """Whether `pattern` may pick some layers of a stack and not others: one of its dotted
    parts is a layer index or a glob of one (`1`, `1*`, `?`, `[0-9]`), not a plain name (`fc1`)
    or a bare `*`. The traces of a few layers would then not be those of the stack's first
    layers (`model.layers.1*` freezes layers 1 and 10-19 of 24, of 4 only layer 1)."""
    return any(
        part.strip("*?[]!-0123456789") == "" and any(c.isdigit() or c in "?[" for c in part)
        for part in pattern.split(".")
    )


def stamped(spec: TrainSpec, trace_at: Callable[[int], Traced]) -> tuple[Any | None, StampNote]:
    """The step of `spec` stamped at its layer count from `trace_at(layers)` (a `StepTrace`
    and its cost log's entries), with how it was made; None where it cannot be (then the
    note says why).

    The rule is fitted at two consecutive counts and checked at the next (`FIT`, `CHECK`);
    where that fails (the first layers' frees can differ from the later ones'), it is fitted
    again one layer up, while that stays `ATTEMPTS` tries and under the model's count."""
    layers = stack_layers(spec)
    if isinstance(layers, Unstamped):
        return None, StampNote(None, layers)
    with collector_paused():  # NB: the fit and the stamped trace make many acyclic objects
        return _stamped(layers, trace_at)


def _stamped(layers: int, trace_at: Callable[[int], Traced]) -> tuple[Any | None, StampNote]:
    traced: dict[int, Traced] = {}
    note = StampNote(layers, Unstamped.FEW_LAYERS)
    for up in range(ATTEMPTS):
        fitted, check = tuple(n + up for n in FIT), CHECK + up
        if check >= layers:
            break
        try:
            for n in (*fitted, check):
                if n not in traced:
                    traced[n] = trace_at(n)
        except TrainfitError as exc:  # NB: the whole step is traced, and says what fails
            return None, StampNote(layers, Unstamped.FEW_FAILED, str(exc), tuple(sorted(traced)))
        counts = tuple(sorted(traced))
        made, why, detail = _checked([traced[n] for n in fitted], fitted, traced[check], check)
        if made is not None:
            try:
                return made(layers), StampNote(layers, None, "", counts)
            except NoPeriod as exc:
                return None, StampNote(layers, Unstamped.MISPREDICTED, str(exc), counts)
        note = StampNote(layers, why, detail, counts)
    return None, note


def _checked(
    traced: list[Traced], counts: tuple[int, ...], actual: Traced, check: int
) -> tuple[Callable[[int], Any] | None, Unstamped | None, str]:
    """The rule fitted to `traced` as a function of the layer count when it makes `actual`
    (at `check` layers) exactly; else None, and why not."""
    why, detail = Unstamped.NOT_INSERTIONS, ""
    try:
        streams = [_streams(t, entries) for t, entries in traced]
    except NoPeriod as exc:
        return None, why, str(exc)
    fitted: dict[tuple[str, int], Layout | NoPeriod] = {}
    for order, *near in itertools.product(ORDERS, NEAR, NEAR):
        try:
            rule = _Rule.of(traced, counts, (near[0], near[1]), order, streams, fitted)
            made, made_entries = rule.made(check)
        except NoPeriod as exc:
            detail = str(exc)
            continue
        trace, entries = actual
        if made == trace and made.costs == trace.costs and made_entries == entries:
            return rule.trace, None, ""
        why, detail = Unstamped.MISPREDICTED, f"at {check} layers"
    return None, why, detail


@dataclass(slots=True)
class _Rule:
    """How each part of a trace grows with its layer count."""

    base: Any
    """The trace at the first fitted count (the fields that do not grow)."""
    counts: tuple[int, ...]
    events: Layout
    workspaces: Layout
    passes: Layout
    costs: Layout
    numbers: dict[str, tuple[int, int]]
    """Per count field: its value at `counts[0]` and its growth per layer."""
    attention: dict[Any, tuple[int, int]]

    @classmethod
    def of(
        cls,
        traced: list[Traced],
        counts: tuple[int, ...],
        near: tuple[int, int],
        order: str,
        streams: list[list[list[Item]]],
        fitted: dict[tuple[str, int], Layout | NoPeriod],
    ) -> _Rule:
        """The rule of traces at consecutive `counts`; `near`: the events' and the other
        sequences' (`trainfit.trace.periodic.NEAR`); `order` as in `periodic.ORDERS`.
        `streams`: the traces' `_streams`; `fitted`: the events' layouts fitted so far for
        these traces, by order and events' `near` (kept across the forms tried)."""
        traces = [t for t, _ in traced]
        events = fitted.get((order, near[0]))
        if events is None:
            try:
                events = fit([s[0] for s in streams], counts, None, near[0], order, _frees)
            except NoPeriod as exc:
                events = exc
            fitted[order, near[0]] = events
        if isinstance(events, NoPeriod):
            raise NoPeriod(str(events))
        layouts = [
            fit([s[i] for s in streams], counts, events, near[1], order, _holds)
            for i in range(1, len(streams[0]))
        ]
        first, second = traces[0], traces[1]
        step = counts[1] - counts[0]
        for name in _FIXED:
            if getattr(first, name) != getattr(second, name):
                raise NoPeriod(f"{name} differs between layer counts")
        if first.attention.keys() != second.attention.keys():
            raise NoPeriod("attention kernels differ between layer counts")
        return cls(
            base=first,
            counts=counts,
            events=events,
            workspaces=layouts[0],
            passes=layouts[1],
            costs=layouts[2],
            numbers={n: _line(getattr(first, n), getattr(second, n), step) for n in _GROWING},
            attention={k: _line(v, second.attention[k], step) for k, v in first.attention.items()},
        )

    def entries(self, layers: int) -> list[tuple[OpCost, int, Any, int]]:
        # NB: a cost item has no reference, so the copies of a run's block are the block's own
        # items: each is made an entry once (by identity: every item is alive in `items`)
        items = resolve(self.costs, layers, self.events)
        made: dict[int, tuple[OpCost, int, Any, int]] = {}
        out = []
        for item in items:
            entry = made.get(id(item))
            if entry is None:
                entry = made[id(item)] = _cost_entry(item)
            out.append(entry)
        return out

    def trace(self, layers: int) -> Any:
        return self.made(layers)[0]

    def made(self, layers: int) -> tuple[Any, list[tuple[OpCost, int, Any, int]]]:
        """The trace at `layers` layers and its cost log's entries."""
        items = resolve(self.events, layers, None)
        events, keys, categories, reference = _events(items)
        log = CostLog()
        entries = self.entries(layers)
        indices: dict[int, int] = {}  # NB: an entry's table index, by identity (see `entries`)
        for entry in entries:
            cost, iteration, phase, tensors = entry
            index = indices.get(id(entry))
            if index is None or tensors:
                indices[id(entry)] = log.add(cost, iteration, phase, tensors)
            else:
                log.add_index(index, iteration, phase)
        start = self.counts[0]
        trace = dataclasses.replace(
            self.base,
            events=events,
            workspaces=[
                WorkspaceEvent(index=item.ref, thread=item.token[1])
                for item in resolve(self.workspaces, layers, self.events)
            ],
            categories=categories,
            reference_keys=frozenset(reference),
            passes=_passes(resolve(self.passes, layers, self.events), keys, items),
            costs=log.step_costs(),
            attention={k: a + (layers - start) * b for k, (a, b) in self.attention.items()},
            **{n: a + (layers - start) * b for n, (a, b) in self.numbers.items()},
        )
        return trace, entries


_FIXED = (
    "description",
    "loss_note",
    "assumptions",
    "notes",
    "replayed_passes",
    "attention_calls",
    "tokens_per_sample",
    "dtypes",
    "model_class",
    "reference_itemsize",
)
"""`StepTrace` fields that must not change with the layer count."""
_GROWING = ("parameter_count", "trainable_count", "ops", "trainable_tensors")
"""`StepTrace` count fields that grow by the same amount per layer."""


def _frees(item: Item, event: Item) -> bool:
    """Whether a free's item may refer to `event`: an allocation of the op and size it says."""
    return event.token[0] == "a" and event.token[3] == item.token[3] and event.nums == item.nums


def _holds(item: Item, event: Item) -> bool:
    """Whether a pass's gradient may live in `event`'s storage: an allocation of its size."""
    if item.token[0] != "g":
        return True
    return event.token[0] == "a" and event.nums[0] == item.token[1]


def _line(first: int, second: int, step: int) -> tuple[int, int]:
    growth, rest = divmod(second - first, step)
    if rest:
        raise NoPeriod("a count grows by a fraction per layer")
    return first, growth


def _streams(trace: Any, entries: list[tuple[OpCost, int, Any, int]]) -> list[list[Item]]:
    """A trace as four sequences of items (events, workspaces, passes, costs), each item a
    token, the event position it refers to, and the numbers that may grow with the layers."""
    where: dict[int, int] = {}
    events = []
    for i, e in enumerate(trace.events):
        if e.alloc:
            where[e.key] = i
            category = trace.categories.get(e.key)
            token = ("a", e.phase, e.iteration, e.op, category, e.key in trace.reference_keys)
            events.append(Item(token, None, (e.nbytes,)))
        else:
            made = trace.events[where[e.key]]
            token = ("f", e.phase, e.iteration, made.op)
            events.append(Item(token, where[e.key], (made.nbytes,)))
    if set(trace.categories) - set(where) or set(trace.reference_keys) - set(where):
        raise NoPeriod("a category or reference key without its allocation")
    workspaces = [Item(("w", w.thread), w.index) for w in trace.workspaces]
    passes = []
    for p in trace.passes:
        passes += [Item(("p", p.untracked_grad), p.start), Item(("pe",), p.end)]
        for g in p.grads:
            if g is None:
                passes.append(Item(("g0",)))
            else:
                layout = (g.storage_bytes, g.dtype, g.shape, g.stride, g.offset)
                passes.append(Item(("g", *layout), where[g.key]))
        passes += [Item(("pw", thread), p.start + at) for at, thread in p.workspaces]
    costs = [
        Item(
            (
                c.kind,
                c.dtype,
                c.graph,
                c.layers,
                c.gates,
                c.gradient,
                c.attention,
                iteration,
                phase,
                tensors > 0,
            ),
            None,
            (c.flops, c.bytes, tensors or c.kernels, c.detail),
        )
        for c, iteration, phase, tensors in entries
    ]
    return [events, workspaces, passes, costs]


def _cost_entry(item: Item) -> tuple[OpCost, int, Any, int]:
    """A cost log entry from its item: a foreach op's launches follow from its list length."""
    kind, dtype, graph, layers, gates, gradient, attention, iteration, phase, foreach = item.token
    flops, nbytes, kernels, detail = item.nums
    tensors = kernels if foreach else 0
    launches = foreach_launches(tensors) if foreach else kernels
    cost = OpCost(
        kind, dtype, flops, nbytes, launches, detail, graph, layers, gates, gradient, attention
    )
    return cost, iteration, phase, tensors


def _events(items: list[Item]) -> tuple[list[Event], list[int], dict[int, Any], list[int]]:
    """Events from their items: storage keys numbered in allocation order, as the recorder
    numbers them; with each position's key, the categories and the reference keys."""
    events: list[Event] = []
    keys: list[int] = []
    categories: dict[int, Any] = {}
    reference: list[int] = []
    made = 0
    freed: set[int] = set()
    for item in items:
        if item.token[0] == "a":
            _, phase, iteration, op, category, is_reference = item.token
            (nbytes,) = item.nums
            key, made = made, made + 1
            events.append(Event(key, nbytes, True, phase, iteration, op))
            if category is not None:
                categories[key] = category
            if is_reference:
                reference.append(key)
        else:
            key = _made_key(items, keys, item.ref)
            what = events[item.ref]  # type: ignore[index]
            if key in freed or (what.op, what.nbytes) != (item.token[3], item.nums[0]):
                raise NoPeriod(f"a free at {len(events)} does not free what its token says")
            freed.add(key)
            events.append(Event(key, 0, False, item.token[1], item.token[2], "free"))
        keys.append(key)
    return events, keys, categories, reference


def _made_key(events: list[Item], keys: list[int], at: int | None) -> int:
    """The storage key of the allocation at position `at` (made before the referring item)."""
    if at is None or at >= len(keys) or events[at].token[0] != "a":
        raise NoPeriod(f"a reference to position {at}, not an earlier allocation")
    return keys[at]


def _passes(
    items: list[Item], keys: list[int], items_of_events: list[Item]
) -> tuple[RecordedPass, ...]:
    made: list[dict[str, Any]] = []
    for item in items:
        kind = item.token[0]
        if kind == "p":
            made.append({"start": item.ref, "untracked_grad": item.token[1], "grads": []})
            made[-1]["workspaces"] = []
        elif kind == "pe":
            made[-1]["end"] = item.ref
        elif kind == "g0":
            made[-1]["grads"].append(None)
        elif kind == "g":
            size, dtype, shape, stride, offset = item.token[1:]
            layout = _GradLayout(
                key=_made_key(items_of_events, keys, item.ref),
                storage_bytes=size,
                dtype=dtype,
                shape=shape,
                stride=stride,
                offset=offset,
            )
            made[-1]["grads"].append(layout)
        else:
            made[-1]["workspaces"].append((item.ref - made[-1]["start"], item.token[1]))
    return tuple(
        RecordedPass(
            start=p["start"],
            end=p["end"],
            grads=tuple(p["grads"]),
            untracked_grad=p["untracked_grad"],
            workspaces=tuple(p["workspaces"]),
        )
        for p in made
    )
