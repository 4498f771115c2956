"""Sequences that grow by whole blocks per layer: found from two counts, made at any count."""

from __future__ import annotations

import pytest

from trainfit.trace.periodic import Item, NoPeriod, fit, resolve


def _events(layers: int) -> list[Item]:
    """A toy step: a fixed input, each layer's forward allocations, a head; the backward
    frees each layer's activations last layer first, and the first layer's backward frees the
    input (an edge copy that refers otherwise than the others)."""
    seq: list[Item] = [Item(("a", "input"))]
    forward = {}
    for layer in range(layers):
        forward[layer] = len(seq)
        seq += [Item(("a", "act")), Item(("a", "tmp")), Item(("f", "tmp"), len(seq) + 1)]
    seq.append(Item(("a", "head")))
    for layer in reversed(range(layers)):
        seq += [Item(("a", "grad")), Item(("f", "act"), forward[layer])]
        if layer == 0:
            seq.append(Item(("f", "input"), 0))
        else:
            seq.append(Item(("f", "other"), len(seq) - 2))
    seq.append(Item(("f", "head"), forward[layers - 1] + 3))
    return seq


def _costs(layers: int) -> list[Item]:
    """A fixed op whose numbers grow per layer (a foreach list), then one op per layer."""
    return [Item(("foreach",), None, (10 + 3 * layers, 2 * layers))] + [
        Item(("mm",), None, (7, 1)) for _ in range(layers)
    ]


def test_a_stack_made_from_two_counts_equals_the_stack_at_more_layers() -> None:
    events = fit([_events(2), _events(3)], (2, 3), None)
    for layers in (4, 7, 32):
        assert resolve(events, layers, None) == _events(layers)


def test_numbers_that_grow_per_layer_grow_at_any_count() -> None:
    events = fit([_events(2), _events(3)], (2, 3), None)
    costs = fit([_costs(2), _costs(3)], (2, 3), events)
    assert resolve(costs, 9, events) == _costs(9)


def test_a_sequence_that_loses_items_is_refused() -> None:
    with pytest.raises(NoPeriod):
        fit([_events(3), _events(3)[:-2]], (2, 3), None)


def test_counts_that_are_not_consecutive_are_refused() -> None:
    with pytest.raises(NoPeriod, match="consecutive"):
        fit([_events(2), _events(4)], (2, 4), None)


@pytest.mark.parametrize("layers", [3, 6])
def test_a_reference_resolves_to_the_position_its_label_has(layers: int) -> None:
    # NB: `_Places.named` (resolve's path) against `_target` then `position` (the fit's), for
    # every form kind from every copy, out-of-range copies included
    from trainfit.trace.periodic import _Places, _target

    layout = fit([_events(2), _events(3)], (2, 3), None)
    places = _Places(layout, layers)
    forms: list[tuple[object, ...]] = [("E",), *(("F", g) for g in range(len(layout.fixed)))]
    for j, run in enumerate(layout.runs):
        forms += [
            (kind, j, number, offset)
            for kind in "STDO"
            for number in range(-2, 3)
            for offset in range(len(run.block))
        ]
    checked = refused = 0
    for run in layout.runs:
        copies = run.copies(layers)
        for copy in range(copies):
            for form in forms:
                try:
                    expected = places.position(_target(form, copy, copies, places))
                except NoPeriod:
                    with pytest.raises(NoPeriod, match="a reference to copy"):
                        places.named(form, copy, copies)
                    refused += 1
                    continue
                assert places.named(form, copy, copies) == expected
                checked += 1
    assert checked and refused  # NB: both paths were taken


def test_a_form_of_no_known_kind_is_an_error() -> None:
    from trainfit.trace.periodic import _Places

    places = _Places(fit([_events(2), _events(3)], (2, 3), None), 4)
    with pytest.raises(ValueError, match="kind 'X': S, T, D or O"):
        places.named(("X", 0, 0, 0), 0, 4)


def test_opcodes_are_difflibs_kept_per_sequence_pair() -> None:
    import difflib

    from trainfit.trace import periodic

    a = tuple(x.token for x in _events(2))
    b = tuple(x.token for x in _events(3))
    made = difflib.SequenceMatcher(None, a, b, False).get_opcodes()
    assert periodic._opcodes(a, b) == made
    assert periodic._opcodes(tuple(a), tuple(b)) is periodic._opcodes(a, b)  # NB: kept
    assert periodic._opcodes(b, a) == difflib.SequenceMatcher(None, b, a, False).get_opcodes()
    assert periodic._opcodes(b, a) != made
