"""Trace the start of `model.generate()` without weights: a prefill and one decode step.

What transformers 5's greedy `generate()` runs for a causal LM (generation/utils.py): a
`DynamicCache(config=model.config)`, a prefill forward of the prompt with `use_cache=True` and
`logits_to_keep=1` (where the model's forward takes it: only the last position's logits are
computed), an fp32 copy of those logits (`outputs.logits[:, -1].to(copy=True,
dtype=torch.float32)`), an argmax, then one forward per new token whose K/V the cache appends
with `torch.cat` (a new tensor per layer per token; the old one is freed).

The model is built on the meta device in the inference dtype, its weights become fake tensors,
and the prefill (iteration 0) and the first decode step (iteration 1) run under no_grad with
the `Recorder` underneath, as a CUDA target would run them (its attention routing).

Known limitations:
- the attention mask is all ones (the data-dependent "is it all ones" check is answered yes):
  padded batches are not traced;
- of generate()'s own per-token work outside the forward, the greedy loop's tensor ops are
  emulated (no EOS token, no logits processors); its Python overhead is not;
- one prompt length for the whole batch; no beam search, sampling or speculative decoding.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainfit.errors import SpecError, TraceError
from trainfit.models.heads import task_of_model
from trainfit.models.imports import resolve
from trainfit.models.live_names import is_live, model_label
from trainfit.models.program import Description, TaskNote
from trainfit.models.source import build_program
from trainfit.spec import TrainSpec
from trainfit.trace.context import tracing
from trainfit.trace.costs import StepCosts
from trainfit.trace.recorder import Event, Recorder, WorkspaceEvent
from trainfit.trace.target import Target
from trainfit.training import Phase


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheLayer:
    """One layer's K and V in the cache after the first decode step."""

    key_keys: tuple[int, int]
    """Recorder keys of the K and V storages."""
    tokens: int
    """Positions held (context + 1, or the sliding window's size)."""
    bytes_per_token: int
    """Bytes of K and V together per position (whole batch)."""
    window: int | None
    """Positions a sliding-window layer keeps at most (None: full attention)."""


@dataclass(kw_only=True, slots=True)
class GenerationTrace:
    """What the prefill and the first decode step allocated and cost."""

    events: list[Event]
    """Allocations and frees up to the end of the first decode step."""
    workspaces: list[WorkspaceEvent]
    weights: dict[int, tuple[nn.Module, str, torch.Tensor]]
    """Recorder key -> (owning module, attribute name, tensor) of each parameter and buffer."""
    head_keys: frozenset[int]
    """Keys of the output head's parameters (quantizers keep it in 16 bit)."""
    cache: tuple[CacheLayer, ...]
    cache_keys: frozenset[int]
    """Keys of every K/V storage the cache held (after the prefill and after the decode step)."""
    prefill: StepCosts
    decode: StepCosts
    prefill_end: int
    """Index into `events` where the decode step starts."""
    description: Description
    ops: int
    logits_to_keep: bool
    """Whether the model's forward takes `logits_to_keep` (generate() then passes 1)."""


def _greedy_step(
    net: nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    unfinished: torch.Tensor,
    cache: object,
    extra: dict[str, int],
    first: bool,
    cache_arg: str = "past_key_values",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One token of transformers 5's greedy `_sample` loop without an EOS token: the forward,
    the fp32 copy of the last logits, argmax, the ids' and mask's growth, the max-length
    criterion and the stop check (`unfinished.max() == 0` read on the host: a sync)."""
    # NB: position ids and cache positions, which prepare_inputs_for_generation makes from
    # small host-side tensors, are not emulated (a few tiny ops per token)
    inputs = ids if first else ids[:, -1:]
    out = net(input_ids=inputs, attention_mask=mask, use_cache=True, **{cache_arg: cache}, **extra)
    scores = out.logits[:, -1].to(copy=True, dtype=torch.float32)
    del out
    tokens = torch.argmax(scores, dim=-1)
    ids = torch.cat([ids, tokens[:, None]], dim=-1)
    done = torch.full((ids.shape[0],), False, dtype=torch.bool)
    unfinished = unfinished & ~done
    bool(unfinished.max() == 0)  # the host waits for the device (answered: not finished)
    mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
    return ids, mask, unfinished


def _keys_of(recorder: Recorder, cache: object) -> set[int]:
    """Recorder keys of the cache's K and V storages now."""
    keys = set()
    for layer in getattr(cache, "layers", ()):
        for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(tensor, torch.Tensor) and tensor.numel():
                key = recorder.key_of(tensor)
                if key is not None:
                    keys.add(key)
    return keys


def _cost_runs(recorder: Recorder) -> tuple[StepCosts, StepCosts]:
    """The prefill's and the decode step's ops as forward passes of two StepCosts."""
    table = tuple(recorder.costs._table)  # NB: the log's table, in index order
    runs = {it: ops for it, phase, ops in recorder.costs._runs() if phase is Phase.FORWARD}
    return (
        StepCosts(table, runs.get(0, ()), (), ()),
        StepCosts(table, runs.get(1, ()), (), ()),
    )


def trace_generation(
    model: str, *, context: int, new_tokens: int, batch: int, target: Target, dtype: torch.dtype
) -> GenerationTrace:
    """Trace the prefill of `batch` prompts of `context` tokens and one decode step (of the
    `new_tokens` the generation makes: they must fit the model's positions)."""
    net, description = _generation_program(
        model, context=context, new_tokens=new_tokens, batch=batch
    )
    from transformers import DynamicCache

    net.eval()
    net.to(dtype)
    parameters = inspect.signature(net.forward).parameters
    keeps = "logits_to_keep" in parameters
    extra = {"logits_to_keep": 1} if keeps else {}
    # NB: the cache's argument is `cache` from transformers 5.2x (`past_key_values` warns there)
    cache_arg = "cache" if "cache" in parameters else "past_key_values"
    cache_keys: set[int] = set()
    with tracing(net, target, None, transformers=True, grad=False) as tracer:
        recorder = tracer.recorder
        weights, head_keys = _track_weights(recorder, net)
        advice = "check the context and batch given for this model"
        with tracer.failures("the generation forward", advice):
            recorder.phase = Phase.FORWARD
            ids = torch.empty((batch, context), dtype=torch.int64)
            mask = torch.ones((batch, context), dtype=torch.int64)
            unfinished = torch.ones(batch, dtype=torch.int64)
            cache = DynamicCache(config=net.config)
            ids, mask, unfinished = _greedy_step(
                net, ids, mask, unfinished, cache, extra, True, cache_arg
            )
            cache_keys |= _keys_of(recorder, cache)
            prefill_end = len(recorder.events)
            recorder.iteration = 1
            ids, mask, unfinished = _greedy_step(
                net, ids, mask, unfinished, cache, extra, False, cache_arg
            )
            cache_keys |= _keys_of(recorder, cache)
            recorder.phase = Phase.SETUP
        layers = _cache_layers(recorder, cache)
        end = len(recorder.events)
        prefill, decode = _cost_runs(recorder)
        del cache
    return GenerationTrace(
        events=recorder.events[:end],
        workspaces=recorder.workspaces,
        weights=weights,
        head_keys=frozenset(head_keys),
        cache=layers,
        cache_keys=frozenset(cache_keys),
        prefill=prefill,
        decode=decode,
        prefill_end=prefill_end,
        description=description,
        ops=recorder.ops,
        logits_to_keep=keeps,
    )


def _generation_program(
    model: str, *, context: int, new_tokens: int, batch: int
) -> tuple[nn.Module, Description]:
    """The causal LM `model` on the meta device and its description, checked: its positions
    hold the generation. A live model (`trainfit.models.live`) is its registered meta copy."""
    if is_live(model):
        net = resolve(model, "model factory")()
        found = task_of_model(net)
        task = None if found is None else found.value
        description = Description(
            source=model_label(model),
            model=getattr(getattr(net, "config", None), "model_type", type(net).__name__),
            task=None if found is None else TaskNote(task=found),
        )
    else:
        program = build_program(TrainSpec(model=model, batch=batch, seq_len=context), "meta")
        net, task, description = program.model, program.task, program.description
    if task != "causal-lm":
        raise SpecError(
            [
                f"inference is estimated for causal language models (generate()); "
                f"{model_label(model)} is {task or 'a plain module'}: choose a causal LM such "
                "as gpt2"
            ]
        )
    config = net.config
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if limit is not None and context + new_tokens - 1 > limit:
        raise SpecError(
            [
                f"context {context} + new tokens {new_tokens} - 1 = {context + new_tokens - 1} "
                f"exceeds {model_label(model)}'s maximum of {limit} positions: shorten the prompt "
                "or the generation"
            ]
        )
    return net, description


def _track_weights(
    recorder: Recorder, net: nn.Module
) -> tuple[dict[int, tuple[nn.Module, str, torch.Tensor]], set[int]]:
    """Record every parameter and buffer as allocated by `model.to(device)`: each key's (owning
    module, attribute name, tensor), and the keys of the output head's parameters."""
    head = net.get_output_embeddings() if hasattr(net, "get_output_embeddings") else None
    head_ids = {id(p) for p in head.parameters()} if isinstance(head, nn.Module) else set()
    weights: dict[int, tuple[nn.Module, str, torch.Tensor]] = {}
    head_keys: set[int] = set()
    for module in net.modules():
        for name, tensor in (*module._parameters.items(), *module._buffers.items()):
            if tensor is None:
                continue
            key = recorder.track(tensor, "model.to(device)")
            if key is not None and key not in weights:
                weights[key] = (module, name, tensor)
                if id(tensor) in head_ids:
                    head_keys.add(key)
    return weights, head_keys


def _cache_layers(recorder: Recorder, cache: Any) -> tuple[CacheLayer, ...]:
    """Each layer's K and V in the cache now."""
    layers = []
    for layer in cache.layers:
        keys, values = layer.keys, layer.values
        pair = (recorder.key_of(keys), recorder.key_of(values))
        if pair[0] is None or pair[1] is None:
            raise TraceError("the KV cache's tensors were not seen by the tracer")
        per_token = (keys.numel() + values.numel()) * keys.element_size() // keys.shape[-2]
        layers.append(
            CacheLayer(
                key_keys=(pair[0], pair[1]),
                tokens=keys.shape[-2],
                bytes_per_token=per_token,
                window=getattr(layer, "sliding_window", None),
            )
        )
    return tuple(layers)
