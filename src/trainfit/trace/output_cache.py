"""The recorder's output cache: the outputs of an op made again from its arguments' metadata.

A training step repeats each op of a block once per layer on the same shapes; `OutputCache`
answers the repeats without dispatching to FakeTensorMode (see its docstring for what it may
answer and how). What it learns is kept for the process's later traces of the same target and
autocast dtype (`shared_entries`): a stamped step traces its model at 2, 3 and 4 layers on the
same shapes, and a plan traces one setting at several micro-batches (the weights', gradients'
and optimizer's ops keep their shapes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensor

from trainfit.trace.compat import torch_release


class _Uncacheable(Exception):
    """An argument the output cache cannot key on."""


_PLAIN = (
    int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format,
)  # fmt: skip
_BAD_TAGS = (
    torch.Tag.dynamic_output_shape,
    torch.Tag.data_dependent_output,
    torch.Tag.inplace_view,
)
_RESHAPING = frozenset({"set_", "resize_", "resize_as_", "_resize_output_", "as_strided_"})
"""In-place ops that change a tensor's metadata or storage (never answered from the cache)."""
MISS = object()
"""What `OutputCache.replay` returns for a call it has no outputs for."""
_NOT_CACHED = object()
"""An entry for a call whose outputs cannot be synthesised (kept so it is not checked again)."""


@dataclass(frozen=True, slots=True)
class _Fresh:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device


@dataclass(frozen=True, slots=True)
class _View:
    base: int
    """Index of the argument whose storage the output shares."""
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    device: torch.device


@dataclass(frozen=True, slots=True)
class _Same:
    arg: int
    """Index of the argument returned as is (an in-place op)."""


_TABLES: dict[tuple[object, ...], dict[tuple[object, ...], object]] = {}
"""`shared_entries`' tables, by scope and the global state a call's outputs may read."""
_LIMIT = 200_000
"""Entries past which a table starts again empty (a long process tracing many models):
checked as a trace takes its table, so one trace's own entries are not bounded."""
_CACHEABLE: dict[object, bool] = {}
"""`_cacheable` by op (a property of the op alone)."""
MADE_AS_FAKE_TENSOR_MODE = torch_release() in ((2, 13),)
"""Whether fake tensors are made here as FakeTensorMode makes them, without its constructor
and converter (`lifted`, `OutputCache._fake`): only on the torch releases where that was
checked (tests/trace/test_output_cache.py); on others FakeTensorMode makes them."""


def shared_entries(scope: tuple[object, ...]) -> dict[tuple[object, ...], object]:
    """The output cache's entries kept for the traces of `scope` in this process.

    An entry is how an op's outputs are made from its arguments' metadata (shapes, strides,
    dtypes, devices, offsets and the plain values of its key): the same for every trace that
    dispatches that op to the same kernels. `scope` names what a trace installs below the
    recorder (its target's rules, which register meta kernels of their own, and its autocast
    dtype); the default dtype, the default device and inference mode, which FakeTensorMode's
    own cache keys on, are added here. A table past `_LIMIT` entries starts again empty.
    """
    context = (
        scope,
        torch.get_default_dtype(),
        torch._C._get_default_device(),
        torch.is_inference_mode_enabled(),
    )
    table = _TABLES.get(context)
    if table is None or len(table) > _LIMIT:
        table = _TABLES[context] = {}
    return table


class OutputCache:
    """Outputs of ops by op and argument metadata, made again without dispatching.

    NB: FakeTensorMode has a dispatch cache of its own, but its generic key (every argument
    flattened and checked, ~0.2 ms an op on a laptop core) costs about as much as the meta
    kernels it saves. A training step repeats each op of a block once per layer on the same
    shapes, so most ops are hits. An output is made again as FakeTensorMode's own cache makes
    it (a meta tensor made with Python dispatch off, wrapped as a fake tensor): a new fake
    tensor with the recorded shape, strides and dtype (a new storage), the same made over the
    storage of the argument it viewed, or the argument itself (in-place ops).
    Ops whose output shape depends on data, in-place ops that change metadata, and calls with
    real or constant-carrying tensor arguments always dispatch; so does a call whose outputs
    were none of those three kinds (checked on the first call, not trusted from the schema:
    `_unsafe_view` returns a view and declares none).
    """

    def __init__(self, entries: dict[tuple[object, ...], object] | None = None) -> None:
        """`entries`: a table shared with other traces (`shared_entries`); default, its own."""
        self._entries: dict[tuple[object, ...], object] = {} if entries is None else entries
        self._cacheable = _CACHEABLE
        self._mode: Any = None
        self._states: dict[torch.device, dict[str, Any]] = {}
        """A new fake tensor's attributes by device (`_fake`)."""
        self.hits = 0

    def key(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[object, ...] | None:
        """The cache key of a call, or None when it must dispatch."""
        ok = self._cacheable.get(func)
        if ok is None:
            ok = self._cacheable[func] = _cacheable(func)
        if not ok:
            return None
        parts: list[object] = [func, torch.is_grad_enabled()]
        try:
            for arg in args:
                parts.append(self._part(arg))
            for name, value in kwargs.items():
                parts.append(name)
                parts.append(self._part(value))
        except _Uncacheable:
            return None
        return tuple(parts)

    def _part(self, value: Any) -> object:
        if type(value) is FakeTensor:
            if value.constant is not None:
                raise _Uncacheable
            if value.fake_mode is not self._mode:
                if self._mode is not None:
                    raise _Uncacheable
                self._mode = value.fake_mode
            return (
                value.dtype,
                value.shape,
                value.stride(),
                value.storage_offset(),
                value.fake_device,
            )
        if isinstance(value, _PLAIN):
            return (type(value), value)
        if isinstance(value, (list, tuple)):
            return (type(value), tuple(self._part(item) for item in value))
        raise _Uncacheable

    def replay(self, key: tuple[object, ...], args: tuple[Any, ...]) -> Any:
        """New outputs for a cached call, or MISS."""
        entry = self._entries.get(key, _NOT_CACHED)
        if entry is _NOT_CACHED or self._mode is None:
            # NB: a shared entry may be met before this trace's fake mode is known (a factory
            # op with no tensor argument); it dispatches, as the trace's first such call did
            return MISS
        self.hits += 1
        kind, templates = entry  # type: ignore[misc]
        outputs = [self._make(t, args) for t in templates]
        if kind is None:
            return outputs[0]
        return kind(outputs)

    def _make(self, template: object, args: tuple[Any, ...]) -> Any:
        if isinstance(template, _Same):
            return args[template.arg]
        if isinstance(template, _Fresh):
            with torch._C._DisableTorchDispatch():
                empty = torch.empty_strided(
                    template.shape, template.stride, dtype=template.dtype, device="meta"
                )
            return self._fake(empty, template.device)
        if isinstance(template, _View):
            with torch._C._DisableTorchDispatch():
                empty = torch.empty(0, dtype=template.dtype, device="meta")
                empty.set_(
                    args[template.base].untyped_storage(),
                    template.offset,
                    template.shape,
                    template.stride,
                )
            return self._fake(empty, template.device)
        return template  # a number or None

    def _fake(self, meta: torch.Tensor, device: torch.device) -> FakeTensor:
        """`FakeTensor(mode, meta, device)`, as its constructor makes it.

        NB: the constructor checks and normalises its arguments and sets each attribute
        through its descriptor (~9 us); for a meta tensor without gradient on a device it
        already made a fake tensor on, what it makes is the subclass over `meta` with the
        data-pointer guard, and the same attributes as that first one's (the mode, the
        device, no constant, every memo empty): made so here (~2 us).
        """
        state = self._states.get(device)
        if (
            state is None
            or meta.requires_grad
            or not MADE_AS_FAKE_TENSOR_MODE
            or fake_tensor.FakeTensorConfig.debug  # NB: each would keep its own traceback
        ):
            made = FakeTensor(self._mode, meta, device)
            if state is None and not meta.requires_grad:
                self._states[device] = dict(made.__dict__)
            return made
        out = torch.Tensor._make_subclass(
            FakeTensor, meta, False, dispatch_device=True, device_for_backend_keys=device
        )
        if self._mode._allow_unsafe_data_ptr_access:
            torch._C._set_warn_deprecated_on_mutable_data_ptr(out)
        else:
            torch._C._set_throw_on_mutable_data_ptr(out)
        out.__dict__.update(state)
        return out  # type: ignore[return-value]

    def remember(
        self,
        key: tuple[object, ...],
        out: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        """Keep how to make a dispatched call's outputs again, when each is a new tensor, a
        view of an argument or an argument itself, and the arguments' metadata is unchanged."""
        entry: object = _NOT_CACHED
        after = self.key(key[0], args, kwargs)
        if self._mode is not None and after is not None and key[2:] == after[2:]:
            entry = self._entry(out, args, kwargs)
        self._entries[key] = entry

    def _entry(self, out: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        single = out is None or isinstance(out, torch.Tensor)
        items = [out] if single else out
        if not isinstance(items, (list, tuple)):
            return _NOT_CACHED
        storages = {
            id(arg.untyped_storage()): index
            for index, arg in enumerate(args)
            if isinstance(arg, torch.Tensor)
        }
        # NB: an output over the storage of a tensor in a list or a keyword argument is not
        # remade (no index to find it by)
        nested = {
            id(t.untyped_storage())
            for value in (*args, *kwargs.values())
            for t in (value if isinstance(value, (list, tuple)) else (value,))
            if isinstance(t, torch.Tensor)
        } - set(storages)
        made: set[int] = set()
        templates: list[object] = []
        for item in items:
            if item is None or isinstance(item, (int, float, bool)):
                templates.append(item)
                continue
            template = self._template(item, args, storages, nested, made)
            if template is None:
                return _NOT_CACHED
            templates.append(template)
        return (None if single else type(out), tuple(templates))

    def _template(
        self,
        tensor: Any,
        args: tuple[Any, ...],
        storages: dict[int, int],
        nested: set[int],
        made: set[int],
    ) -> object | None:
        if (
            type(tensor) is not FakeTensor
            or tensor.fake_mode is not self._mode
            or tensor.constant is not None
            or tensor.layout is not torch.strided
            or tensor.is_conj()
            or tensor.is_neg()
        ):
            return None
        for index, arg in enumerate(args):
            if tensor is arg:
                return _Same(index)
        storage = id(tensor.untyped_storage())
        if storage in nested or storage in made:
            return None
        shape, stride = tuple(tensor.shape), tensor.stride()
        if storage in storages:
            return _View(
                base=storages[storage],
                shape=shape,
                stride=stride,
                offset=tensor.storage_offset(),
                dtype=tensor.dtype,
                device=tensor.fake_device,
            )
        if tensor.storage_offset() != 0 or tensor.untyped_storage().nbytes() != _strided_bytes(
            tensor
        ):
            return None
        made.add(storage)
        return _Fresh(shape=shape, stride=stride, dtype=tensor.dtype, device=tensor.fake_device)


def _strided_bytes(tensor: torch.Tensor) -> int:
    """The bytes `torch.empty_strided` allocates for `tensor`'s shape and strides."""
    if any(size == 0 for size in tensor.shape):
        return 0
    span = 1 + sum(
        (size - 1) * step for size, step in zip(tensor.shape, tensor.stride(), strict=True)
    )
    return span * tensor.element_size()


def _cacheable(func: Any) -> bool:
    """Whether `func`'s outputs depend on its arguments' metadata only, and it changes no
    argument's metadata."""
    if not isinstance(func, torch._ops.OpOverload):
        return False
    if any(tag in func.tags for tag in _BAD_TAGS):
        return False
    return func._schema.name.split("::")[-1] not in _RESHAPING


def lifted(mode: Any, tensor: Any) -> FakeTensor | None:
    """`aten.lift_fresh(tensor)` under FakeTensorMode `mode`, made as FakeTensorMode makes it,
    for a real scalar (`torch.tensor(0.0)`: the optimizers' step counters, a few per parameter
    and trace); None for any other tensor (the caller dispatches).

    NB: FakeTensorMode keeps a lifted tensor of at most one element as a constant: it clones
    the tensor and converts the copy (`FakeTensorConverter.from_real_tensor`, `make_constant`),
    which describes it field by field for a conversion memo no copy is ever looked up in
    (~0.2 ms a call). The conversion's result for a plain dense real tensor is a fake tensor
    over a new meta tensor of its shape, strides and dtype, on its device, whose constant is
    the copy, registered for the invalidation of the copy's aliases; that is made here.
    """
    if (
        not MADE_AS_FAKE_TENSOR_MODE
        or type(tensor) is not torch.Tensor
        or tensor.numel() > 1
        or tensor.layout is not torch.strided
        or tensor.device.type == "meta"
        or tensor.requires_grad
        or tensor.is_quantized
        or tensor.is_conj()
        or tensor.is_neg()
        or mode.shape_env is not None
        or mode.propagate_real_tensors
    ):
        return None
    with torch._C._DisableTorchDispatch():
        constant = tensor.clone()
        meta = torch.empty_strided(
            constant.shape, constant.stride(), dtype=constant.dtype, device="meta"
        )
    out = FakeTensor(mode, meta, constant.device, constant=constant)
    converter = mode.fake_tensor_converter
    converter.add_constant_storage_mapping(out)
    # NB: the conversion's memos, which later conversions read: an op on constants only is
    # run on them and its outputs converted (`step += 1` on a step counter gives back the
    # constant itself, converted to this same fake tensor; a view of it, a fake tensor over
    # this one's storage)
    converter.set_tensor_memo(constant, out)
    meta_converter = converter.meta_converter
    storage = meta_converter.describer.get_storage_id(constant.untyped_storage())
    meta_converter.storage_memo[storage] = out.untyped_storage()
    return out
