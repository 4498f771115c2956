"""Sequences that grow by whole blocks per layer, and the rule that makes them at any count.

A sequence of `Item`s (a token, the position of an event it refers to, numbers) is taken at
two consecutive layer counts. Where the longer is the shorter with blocks inserted, each
block is one copy of a run that has one copy per layer (`Run`): every other item is fixed,
and its numbers may grow by a constant per layer. The event an item refers to is named
relative to the item: a fixed item, the end, or a copy of a run counted from its start or
its end, or from the referring copy's own index (same order, or opposite: a layer's backward
frees what its forward made, last layer first). Copies at the ends of a run may refer
otherwise than those inside (the first layer's input is the embedding's output): up to
`EDGE` copies at each end get a rule of their own. `fit` finds the layout and the rules;
`resolve` makes the sequence at any layer count. Nothing here checks a result against a
trace: the caller does (`trainfit.trace.stamp`).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

EDGE = 2
"""The most copies at either end of a run that may follow a rule of their own."""

Label = tuple[object, ...]
"""Where an item sits: ("F", index among fixed items), ("E",) the end, or (run, copy,
offset)."""
Form = tuple[object, ...]
"""How an item names the event it refers to: ("F", fixed index), ("E",), or (kind, run,
number, offset) with kind "S" (copy from the start), "T" (from the end), "D" (the referring
copy's index plus number) or "O" (the referring copy's index from the end, plus number)."""


class NoPeriod(ValueError):
    """The sequences do not grow by whole blocks per layer (the message says where)."""


@dataclass(frozen=True, slots=True)
class Item:
    token: tuple[Hashable, ...]
    ref: int | None = None
    """Position of the event this item refers to (a free's allocation), if any."""
    nums: tuple[int, ...] = ()
    """Numbers that may grow with the layer count (a foreach op's bytes)."""

    def key(self) -> tuple[Hashable, ...]:
        return (self.token, self.nums)


@dataclass(slots=True)
class Run:
    before: int
    """Fixed items before the run."""
    block: list[Item]
    """One copy (its refs unused: see `Layout.rules`)."""
    extra: int
    """Copies minus the layer count."""

    def copies(self, layers: int) -> int:
        return layers + self.extra


@dataclass(slots=True)
class _RefRule:
    head: list[Form]
    """The rules of the first copies, in order."""
    middle: Form
    tail: list[Form]
    """The rules of the last copies, the last first."""
    choices: list[Form] = field(default_factory=list)
    """Every form the fitted counts allow for the inner copies, the preferred first."""

    def form(self, copy: int, copies: int) -> Form:
        if copy < len(self.head):
            return self.head[copy]
        if copies - 1 - copy < len(self.tail):
            return self.tail[copies - 1 - copy]
        return self.middle


@dataclass(slots=True)
class Layout:
    """How one sequence is made at any layer count."""

    start: int
    """The layer count the fixed items' numbers are given at."""
    fixed: list[Item]
    growth: list[tuple[int, ...]]
    """Per fixed item, its numbers' growth per layer."""
    runs: list[Run]
    fixed_refs: list[Form | None] = field(default_factory=list)
    run_refs: list[list[_RefRule | None]] = field(default_factory=list)

    def length(self, layers: int) -> int:
        return len(self.fixed) + sum(r.copies(layers) * len(r.block) for r in self.runs)

    def labels(self, layers: int) -> list[Label]:
        out: list[Label] = []
        index = 0
        for j, run in enumerate(self.runs):
            out += [("F", g) for g in range(index, run.before)]
            index = run.before
            out += [(j, c, o) for c in range(run.copies(layers)) for o in range(len(run.block))]
        out += [("F", g) for g in range(index, len(self.fixed))]
        return out

    def places(self, layers: int) -> tuple[list[int], list[int], int]:
        """At `layers` layers: each fixed item's position, each run's first position, and the
        length."""
        fixed: list[int] = []
        starts: list[int] = []
        at = index = 0
        for run in self.runs:
            fixed += range(at, at + run.before - index)
            at += run.before - index
            index = run.before
            starts.append(at)
            at += run.copies(layers) * len(run.block)
        fixed += range(at, at + len(self.fixed) - index)
        return fixed, starts, at + len(self.fixed) - index


class _Places:
    """Positions of labels at one layer count."""

    def __init__(self, layout: Layout, layers: int) -> None:
        self.layout, self.layers = layout, layers
        self.fixed, self.starts, self.length = layout.places(layers)
        self.copies = [run.copies(layers) for run in layout.runs]
        self.sizes = [len(run.block) for run in layout.runs]

    def named(self, form: Form, copy: int, copies: int) -> int:
        """The position `form` names from copy `copy` of `copies`: `position(_target(...))`
        worked out at once (a stamped trace resolves tens of thousands of references)."""
        kind = form[0]
        if kind == "E":
            return self.length
        if kind == "F":
            return self.fixed[form[1]]  # type: ignore[call-overload]
        _, j, number, offset = form
        run_copies = self.copies[j]  # type: ignore[call-overload]
        index = _copy_named(kind, number, copy, copies, run_copies)  # type: ignore[arg-type]
        if not 0 <= index < run_copies:
            raise NoPeriod(f"a reference to copy {index} of run {j} at {self.layers} layers")
        return self.starts[j] + index * self.sizes[j] + offset  # type: ignore[call-overload,operator,no-any-return]

    def position(self, label: Label) -> int:
        if label[0] == "E":
            return self.length
        if label[0] == "F":
            return self.fixed[int(label[1])]  # type: ignore[call-overload]
        j, copy, offset = (int(x) for x in label)  # type: ignore[call-overload]
        run = self.layout.runs[j]
        if not 0 <= copy < run.copies(self.layers):
            raise NoPeriod(f"a reference to copy {copy} of run {j} at {self.layers} layers")
        return self.starts[j] + copy * len(run.block) + offset


def _numbered(a: list[Item], b: list[Item]) -> tuple[list[int], list[int]]:
    """Each item's key (`Item.key`) as a number, equal numbers for equal keys: the diffs
    compare numbers instead of hashing nested tuples again and again (same matches)."""
    numbers: dict[tuple[Hashable, ...], int] = {}
    ka = [numbers.setdefault(x.key(), len(numbers)) for x in a]
    kb = [numbers.setdefault(x.key(), len(numbers)) for x in b]
    return ka, kb


def _insertions(
    a: list[Item], b: list[Item], near: int, ka: list[int], kb: list[int]
) -> list[tuple[int, int]]:
    """(position in `b`, length) of each block inserted into `a` to make `b` (`ka`, `kb`:
    their items' keys, `_numbered`); where only an item's numbers differ, the two are the same
    item (the differences near one another are compared again by tokens alone)."""
    found = []
    opcodes = _opcodes(tuple(ka), tuple(kb))
    for tag, i1, i2, j1, j2 in _regions(opcodes, near):
        if tag == "insert":
            found.append((j1, j2 - j1))
        elif tag != "equal":
            sa, sb = tuple(x.token for x in a[i1:i2]), tuple(x.token for x in b[j1:j2])
            for sub, _, _, t1, t2 in _opcodes(sa, sb):
                if sub == "insert":
                    found.append((j1 + t1, t2 - t1))
                elif sub != "equal":
                    raise NoPeriod(f"items at {i1} differ beyond their numbers ({sub})")
    return found


@functools.lru_cache(maxsize=128)
def _opcodes(
    a: tuple[Hashable, ...], b: tuple[Hashable, ...]
) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes turning `a` into `b` (no junk), kept for the sequences seen again: a
    function of the sequences alone, and a plan fits the same ones many times (the forms tried,
    the steps that differ only in the micro-batch). The caller does not change the list."""
    return difflib.SequenceMatcher(None, a, b, False).get_opcodes()


ORDERS = ("FEDOST", "FEODST")
"""Which form names a referred item where the counts fitted allow several (the first in the
order), tried in turn like `NEAR`: a fixed item or the end first, then a copy counted from the
referring copy's own index in the same order or the opposite one, then from the run's start
or end. Two layer counts cannot tell apart a copy named in the same order from one named in
the opposite order when the run has one inner copy; the check at the next count can."""
NEAR = (0, 2)
"""How many equal items apart differences may be to be compared again as one, tried in turn
(`trainfit.trace.stamp` keeps the first whose rule its check passes)."""


def _regions(
    opcodes: list[tuple[str, int, int, int, int]], near: int
) -> list[tuple[str, int, int, int, int]]:
    """The opcodes with differences at most `near` equal items apart joined into one
    ("replace"), unless both are insertions."""
    out: list[tuple[str, int, int, int, int]] = []
    for op in opcodes:
        if op[0] != "equal" and len(out) >= 2:
            gap, before = out[-1], out[-2]
            close = gap[0] == "equal" and gap[2] - gap[1] <= near and before[0] != "equal"
            if close and not (before[0] == op[0] == "insert"):
                out[-2:] = [("replace", before[1], op[2], before[3], op[4])]
                continue
        out.append(op)
    return out


def _merged(kb: list[Hashable], found: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The insertions, each moved left as far as the items before it repeat its end, and
    those that then touch made one (a layer's block that the diff cut in two)."""
    out: list[tuple[int, int]] = []
    for q, m in found:
        lower = out[-1][0] + out[-1][1] if out else 0
        while q > lower and kb[q - 1] == kb[q + m - 1]:
            q -= 1
        if out and q == lower:
            out[-1] = (out[-1][0], out[-1][1] + m)
        else:
            out.append((q, m))
    return out


def _run(kb: list[Hashable], q: int, m: int, lower: int, upper: int) -> tuple[int, int]:
    """The end and copies of the run that the block `kb[q:q+m]` is a copy of: the block moved
    right while the items after it repeat it (not past `upper`), then counted back (not past
    `lower`)."""
    while q + m < upper and kb[q] == kb[q + m]:
        q += 1
    end = q + m
    block = kb[q:end]
    copies = 1
    while (
        end - (copies + 1) * m >= lower and kb[end - (copies + 1) * m : end - copies * m] == block
    ):
        copies += 1
    return end, copies


def _pieces(kb: list[Hashable], q: int, m: int, lower: int, upper: int) -> list[tuple[int, int]]:
    """The inserted block `kb[q:q+m]` as one run's copy, or as two where that gives runs of
    more copies (the end of one run and the start of the next, inserted side by side)."""
    best, pieces = _run(kb, q, m, lower, upper)[1], [(q, m)]
    for t in range(1, m):
        if q - t < lower or kb[q - t : q] != kb[q : q + t]:
            continue
        end, left = _run(kb, q, t, lower, q + t)
        right = _run(kb, q + t, m - t, end, upper)[1]
        if min(left, right) > best:
            best, pieces = min(left, right), [(q, t), (q + t, m - t)]
    return pieces


def layout(a: list[Item], b: list[Item], layers: int, near: int) -> Layout:
    """The runs that turn `a` into `b` (`b` at `layers` layers, `a` at one fewer); `near` as
    in `NEAR`."""
    ka, kb = _numbered(a, b)
    found = _merged(kb, _insertions(a, b, near, ka, kb))
    runs: list[Run] = []
    lower, in_runs = 0, 0
    for n, (q0, m0) in enumerate(found):
        upper = found[n + 1][0] if n + 1 < len(found) else len(b)
        pieces = _pieces(kb, q0, m0, lower, upper)
        for i, (q, m) in enumerate(pieces):
            end, copies = _run(kb, q, m, lower, pieces[i + 1][0] if i + 1 < len(pieces) else upper)
            start = end - copies * m
            block = [Item(x.token, None, x.nums) for x in b[end - m : end]]
            runs.append(Run(before=start - in_runs, block=block, extra=copies - layers))
            in_runs += copies * m
            lower = end
    labels = _skeleton(runs, len(b) - in_runs, layers)
    fixed = [x for x, label in zip(b, labels, strict=True) if label[0] == "F"]
    return Layout(start=layers, fixed=fixed, growth=[(0,) * len(x.nums) for x in fixed], runs=runs)


def _skeleton(runs: list[Run], fixed: int, layers: int) -> list[Label]:
    return Layout(start=layers, fixed=[Item(())] * fixed, growth=[], runs=runs).labels(layers)


def fit(
    seqs: list[list[Item]],
    counts: tuple[int, ...],
    events: Layout | None,
    near: int = 0,
    order: str = ORDERS[0],
    accepts: Callable[[Item, Item], bool] | None = None,
) -> Layout:
    """The layout and reference rules of a sequence given at consecutive layer `counts`;
    `events` is the events' own layout (None: the sequence is the events); `near` as in
    `NEAR`, `order` as in `ORDERS`. `accepts(item, event)`: whether `item` may refer to
    `event`; where the fitted counts allow several forms for a run's inner copies, the first
    under which every inner copy refers to an event it accepts (and, in the events, an
    earlier one) at `PROBE` more layers is kept."""
    if len(seqs) != 2 or counts[1] != counts[0] + 1:
        raise NoPeriod("a fit needs a sequence at two consecutive layer counts")
    made = layout(seqs[0], seqs[1], counts[1], near)
    labelled = []
    for seq, layers in zip(seqs, counts, strict=True):
        if len(seq) != made.length(layers):
            raise NoPeriod(f"{len(seq)} items at {layers} layers, not {made.length(layers)}")
        labels = made.labels(layers)
        fixed = [x for x, lab in zip(seq, labels, strict=True) if lab[0] == "F"]
        for x, lab in zip(seq, labels, strict=True):
            if lab[0] != "F" and x.key() != made.runs[lab[0]].block[lab[2]].key():  # type: ignore[index]
                raise NoPeriod(f"a copy of run {lab[0]} differs at {layers} layers")
        labelled.append((seq, labels, fixed, layers))
    first, second = labelled[0][2], labelled[1][2]
    made.fixed, made.start = first, counts[0]
    made.growth = []
    for x, y in zip(first, second, strict=True):
        if x.token != y.token:
            raise NoPeriod("fixed items differ between layer counts")
        made.growth.append(tuple(v - u for u, v in zip(x.nums, y.nums, strict=True)))
    own = made if events is None else events
    _rules(made, own, labelled, order)
    if accepts is not None:
        _settle(made, own, counts[1] + PROBE, accepts, events is None)
    return made


PROBE = 4
"""How many layers past the fitted counts a run's inner copies' forms are tried at."""


def _settle(
    made: Layout,
    events: Layout,
    layers: int,
    accepts: Callable[[Item, Item], bool],
    earlier: bool,
) -> None:
    """Each ambiguous inner rule of `made` set to its first form that names, at `layers`
    layers, an event `accepts` takes (before the referring item where `earlier`)."""
    places, own = _Places(events, layers), _Places(made, layers)
    for j, run in enumerate(made.runs):
        copies = run.copies(layers)
        for offset, rule in enumerate(made.run_refs[j]):
            if rule is None or len(rule.choices) < 2:
                continue
            x, inner = run.block[offset], range(len(rule.head), copies - len(rule.tail))
            for form in rule.choices:
                at = [own.starts[j] + c * len(run.block) + offset for c in inner]
                if all(
                    _names(form, c, copies, x, a if earlier else None, places, accepts)
                    for c, a in zip(inner, at, strict=True)
                ):
                    rule.middle = form
                    break
            else:
                raise NoPeriod(f"no form of run {j} offset {offset} names an accepted event")


def _names(
    form: Form,
    copy: int,
    copies: int,
    item: Item,
    before: int | None,
    places: _Places,
    accepts: Callable[[Item, Item], bool],
) -> bool:
    """Whether `form`, at copy `copy` of `copies`, names an event `item` accepts (before
    position `before`, when given)."""
    try:
        target = _target(form, copy, copies, places)
        at = places.position(target)
    except NoPeriod:
        return False
    if target[0] == "E" or (before is not None and at >= before):
        return False
    layout = places.layout
    if target[0] == "F":
        g = int(target[1])  # type: ignore[call-overload]
        x, grown = layout.fixed[g], places.layers - layout.start
        nums = tuple(n + grown * d for n, d in zip(x.nums, layout.growth[g], strict=True))
        return accepts(item, Item(x.token, None, nums))
    return accepts(item, layout.runs[int(target[0])].block[int(target[2])])  # type: ignore[call-overload]


def _forms(label: Label, target: Label, layout: Layout, events: Layout, layers: int) -> set[Form]:
    """Every form that names `target` from an item at `label`."""
    if target[0] in ("F", "E"):
        return {target}
    j, copy, offset = target
    last = events.runs[int(j)].copies(layers) - 1  # type: ignore[call-overload]
    forms: set[Form] = {("S", j, copy, offset), ("T", j, last - copy, offset)}  # type: ignore[operator]
    if label[0] != "F":
        own, mine = layout.runs[int(label[0])].copies(layers) - 1, int(label[1])  # type: ignore[call-overload]
        forms |= {("D", j, copy - mine, offset), ("O", j, copy - (own - mine), offset)}  # type: ignore[operator]
    return forms


def _rules(
    made: Layout,
    events: Layout,
    labelled: list[tuple[list[Item], list[Label], list[Item], int]],
    order: str,
) -> None:
    fixed_forms: dict[int, list[set[Form]]] = {}
    run_forms: dict[tuple[int, int], list[tuple[int, int, set[Form]]]] = {}
    for seq, labels, _, layers in labelled:
        targets = events.labels(layers)
        for x, lab in zip(seq, labels, strict=True):
            if x.ref is None:
                continue
            target = targets[x.ref] if x.ref < len(targets) else ("E",)
            forms = _forms(lab, target, made, events, layers)
            if lab[0] == "F":
                fixed_forms.setdefault(int(lab[1]), []).append(forms)  # type: ignore[call-overload]
            else:
                copies = made.runs[int(lab[0])].copies(layers)  # type: ignore[call-overload]
                run_forms.setdefault((int(lab[0]), int(lab[2])), []).append(
                    (int(lab[1]), copies, forms)
                )  # type: ignore[call-overload]
    made.fixed_refs = [None] * len(made.fixed)
    for g, sets in fixed_forms.items():
        made.fixed_refs[g] = _pick(set.intersection(*sets), f"fixed item {g}", order)
    made.run_refs = [[None] * len(r.block) for r in made.runs]
    for (j, offset), seen in run_forms.items():
        made.run_refs[j][offset] = _edge_rule(seen, f"run {j} offset {offset}", order)


_EDGES = sorted(
    ((h, t) for h in range(EDGE + 1) for t in range(EDGE + 1)), key=lambda e: (sum(e), -e[0])
)


def _edge_rule(seen: list[tuple[int, int, set[Form]]], where: str, order: str) -> _RefRule:
    for edge_head, edge_tail in _EDGES:
        head: list[set[Form] | None] = [None] * edge_head
        tail: list[set[Form] | None] = [None] * edge_tail
        middle: set[Form] | None = None
        for copy, copies, forms in seen:
            inner = True
            if copy < edge_head:
                head[copy] = forms if head[copy] is None else head[copy] & forms
                inner = False
            if copies - 1 - copy < edge_tail:
                i = copies - 1 - copy
                tail[i] = forms if tail[i] is None else tail[i] & forms
                inner = False
            if inner:
                middle = forms if middle is None else middle & forms
        if middle and all([*head, *tail]):
            return _RefRule(
                [_pick(s, where, order) for s in head if s],
                _pick(middle, where, order),
                [_pick(s, where, order) for s in tail if s],
                sorted(middle, key=lambda f: (order.find(str(f[0])), repr(f))),
            )
    raise NoPeriod(f"no rule names what {where} refers to")


def _pick(forms: set[Form], where: str, order: str) -> Form:
    if not forms:
        raise NoPeriod(f"{where} refers to different items at different layer counts")
    return min(forms, key=lambda f: (order.find(str(f[0])), repr(f)))


def resolve(made: Layout, layers: int, events: Layout | None) -> list[Item]:
    """The sequence at `layers` layers, each item's reference made a position."""
    places = _Places(made if events is None else events, layers)
    out: list[Item] = []
    index = 0
    for j, run in enumerate(made.runs):
        out += (_fixed(made, g, layers, places) for g in range(index, run.before))
        index = run.before
        copies = run.copies(layers)
        block = list(zip(run.block, made.run_refs[j], strict=True))
        named = places.named
        for copy in range(copies):
            for x, rule in block:
                if rule is None:
                    out.append(x)
                else:
                    out.append(Item(x.token, named(rule.form(copy, copies), copy, copies), x.nums))
    out += (_fixed(made, g, layers, places) for g in range(index, len(made.fixed)))
    return out


def _fixed(made: Layout, g: int, layers: int, places: _Places) -> Item:
    x, form = made.fixed[g], made.fixed_refs[g]
    grown = layers - made.start
    nums = tuple(n + grown * d for n, d in zip(x.nums, made.growth[g], strict=True))
    ref = None if form is None else places.position(_target(form, 0, 0, places))
    return Item(x.token, ref, nums)


def _target(form: Form, copy: int, copies: int, places: _Places) -> Label:
    kind = form[0]
    if kind in ("F", "E"):
        return form
    _, j, number, offset = form
    run_copies = places.copies[int(j)]  # type: ignore[call-overload]
    index = _copy_named(str(kind), int(number), copy, copies, run_copies)  # type: ignore[call-overload]
    return (j, index, offset)


def _copy_named(kind: str, number: int, copy: int, copies: int, run_copies: int) -> int:
    """The copy of a run of `run_copies` copies that a form of `kind` with `number` names
    from copy `copy` of `copies` (`Form`)."""
    if kind == "S":
        return number
    if kind == "T":
        return run_copies - 1 - number
    if kind == "D":
        return copy + number
    if kind == "O":
        return copies - 1 - copy + number
    raise ValueError(f"no reference form of kind {kind!r}: S, T, D or O")
