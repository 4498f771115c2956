"""What each op of a traced step would cost a device: FLOPs, bytes moved, kernel launches.

The recorder hands every op it sees (forward, backward, optimizer) to a `CostLog`. Each op
becomes an `OpCost`: its kind (a matrix multiply, a convolution, attention, a recurrent layer,
a memory-bound kernel, a foreach list kernel, host-only work such as a view, or a sync that
reads a value back to the host), the precision it computes in, its FLOPs (PyTorch's own
formulas, `torch.utils.flop_counter`), the bytes it reads and writes (every tensor argument
and new output once; an expanded dimension counts once) and how many kernels it launches.
A step repeats each op of a block once per layer on the same shapes, so the costs are kept
as a table of distinct `OpCost`s and, per phase, the order they ran in.

trainfit.timing turns these into seconds for a device.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry

from trainfit.errors import TraceError
from trainfit.training import Phase

aten = torch.ops.aten


class OpKind(str, Enum):
    """How an op spends device time."""

    MATMUL = "matmul"
    CONV = "conv"
    ATTENTION = "attention"
    RNN = "rnn"
    NORM = "norm"
    """Batch normalisation forward or backward: per-channel reductions, slow in NCHW."""
    MEMORY = "memory"
    """An elementwise op, a reduction, a copy, a normalisation: bound by bytes moved."""
    FOREACH = "foreach"
    """A multi-tensor kernel over lists of tensors (the foreach optimizer, gradient clipping)."""
    HOST = "host"
    """No kernel: a view, an empty tensor, metadata only."""
    SYNC = "sync"
    """A value read back to the host (`.item()`): the host waits for the device."""
    MODULE = "module"
    """A module's call (`nn.Module.__call__`): host work only."""


@dataclass(frozen=True, slots=True)
class AttentionShape:
    """What a fused attention kernel's speed depends on beside its FLOPs."""

    problems: int
    """Independent attention problems in the call (batch x heads)."""
    length: int
    """Query length."""
    head: int
    """Head size."""
    causal: bool
    dropout: bool
    backward: bool
    """Whether the call is the backward kernel."""
    keys: int
    """Key length: the query length in self-attention; 1 query over a cache when decoding."""


@dataclass(frozen=True, slots=True)
class OpCost:
    kind: OpKind
    dtype: str
    """"fp32", "bf16", "fp16", "fp64" or "int" (the first floating input's, else the output's)."""
    flops: int
    bytes: int
    kernels: int
    """Kernel launches; for a recurrent layer, its sequential steps (time steps x layers x
    directions)."""
    detail: int = 0
    """What else decides the kernel: a recurrent layer's recurrent weight elements (gates x
    hidden x output size: cuDNN switches to its persistent kernels below a size), a foreach
    op's tensor count over all its lists, 1 for a matmul with a dimension not a multiple of 16
    bytes (cuBLAS then picks slower kernels), a batch norm's channels (its parallelism), an
    ungrouped convolution's narrow implicit-GEMM side (`_conv_gemm_side`); 0 otherwise."""
    graph: bool = False
    """Whether the op recorded an autograd node (grad mode on and an input requiring grad):
    the host then does more work to issue it."""
    layers: int = 0
    """A recurrent call's layers x directions (each sets up its own sequence of kernels); 0
    for any other op."""
    gates: int = 0
    """A cuDNN recurrent call's gates per step (LSTM 4, GRU 3, RNN_TANH and RNN_RELU 1); 0 for
    any other op."""
    gradient: bool = False
    """Whether the op is a convolution's or a batch norm's backward kernel (cuDNN's gradient
    kernels run at rates of their own); False for every other op, a forward recomputed in the
    backward under checkpointing included."""
    attention: AttentionShape | None = None
    """A fused scaled-dot-product attention call's shape (`_attention_shape`); None for any
    other op."""


@dataclass(frozen=True, slots=True)
class StepCosts:
    """A step's ops: the distinct costs and, per phase, the order they ran in."""

    table: tuple[OpCost, ...]
    forward: tuple[int, ...]
    """One micro-batch's forward and loss (indices into `table`)."""
    backward: tuple[int, ...]
    """One micro-batch's backward (recomputation included under checkpointing)."""
    optimizer: tuple[int, ...]
    """The steady-state optimizer step (unscale, clipping, step, zero_grad)."""

    def ops(self, phase: Phase) -> list[OpCost]:
        return [self.table[i] for i in self._order(phase)]

    def _order(self, phase: Phase) -> tuple[int, ...]:
        return {
            Phase.FORWARD: self.forward,
            Phase.BACKWARD: self.backward,
            Phase.OPTIMIZER: self.optimizer,
        }[phase]

    def flops(self, phase: Phase | None = None) -> int:
        phases = (phase,) if phase else (Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER)
        return sum(self.table[i].flops for p in phases for i in self._order(p))

    def aligned(self, other: StepCosts) -> bool:
        """Whether both ran the same ops in the same order (traces at two batches)."""
        return all(
            len(a) == len(b)
            and all(
                self.table[i].kind is other.table[j].kind
                and self.table[i].dtype == other.table[j].dtype
                and self.table[i].detail == other.table[j].detail
                and self.table[i].graph == other.table[j].graph
                and self.table[i].gradient == other.table[j].gradient
                and _same_attention(self.table[i].attention, other.table[j].attention)
                for i, j in set(zip(a, b, strict=True))
            )
            for a, b in (
                (self.forward, other.forward),
                (self.backward, other.backward),
                (self.optimizer, other.optimizer),
            )
        )


def _same_attention(a: AttentionShape | None, b: AttentionShape | None) -> bool:
    """Whether two traces' attention calls differ at most in their batch (`problems`)."""
    if a is None or b is None:
        return a is b
    return dataclasses.replace(a, problems=b.problems) == b


def _attention_line(
    a: AttentionShape | None, b: AttentionShape | None, line: Any
) -> AttentionShape | None:
    """An aligned attention call at the interpolated batch: its problems on the line."""
    if a is None or b is None:
        return None
    return dataclasses.replace(a, problems=line(a.problems, b.problems))


def interpolate(a: StepCosts, batch_a: int, b: StepCosts, batch_b: int, batch: int) -> StepCosts:
    """Costs at `batch` from two aligned traces: each op's FLOPs and bytes on the line
    through its values at `batch_a` and `batch_b` (kernel counts from the nearer trace)."""
    table: dict[OpCost, int] = {}
    made: dict[tuple[int, int, int], int] = {}
    near = a if abs(batch - batch_a) <= abs(batch - batch_b) else b
    t = (batch - batch_a) / (batch_b - batch_a)

    def line(x: int, y: int) -> int:
        return max(0, round(x + (y - x) * t))

    def index(i: int, j: int, k: int) -> int:
        # NB: a step repeats each block's ops once per layer: the same (i, j, k) triple
        # recurs, so each distinct op is interpolated once
        found = made.get((i, j, k))
        if found is None:
            x, y = a.table[i], b.table[j]
            cost = OpCost(
                kind=x.kind,
                dtype=x.dtype,
                flops=line(x.flops, y.flops),
                bytes=line(x.bytes, y.bytes),
                kernels=near.table[k].kernels,
                detail=x.detail,
                graph=x.graph,
                layers=x.layers,
                gates=x.gates,
                gradient=x.gradient,
                attention=_attention_line(x.attention, y.attention, line),
            )
            found = made[(i, j, k)] = table.setdefault(cost, len(table))
        return found

    orders = [
        tuple(index(i, j, k) for i, j, k in zip(order_a, order_b, order_near, strict=True))
        for order_a, order_b, order_near in (
            (a.forward, b.forward, near.forward),
            (a.backward, b.backward, near.backward),
            (a.optimizer, b.optimizer, near.optimizer),
        )
    ]
    return StepCosts(tuple(table), *orders)


_MATMUL = {aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.addbmm, aten._scaled_mm}
_CONV = {
    aten.convolution,
    aten._convolution,
    aten.cudnn_convolution,
    aten.cudnn_convolution_transpose,
    aten.convolution_backward,
    aten.convolution_overrideable,
    aten._slow_conv2d_forward,
    aten.miopen_convolution,
}
_ATTENTION = {
    aten._scaled_dot_product_flash_attention,
    aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention,
    aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention_backward,
    aten._flash_attention_forward,
    aten._flash_attention_backward,
    aten._efficient_attention_forward,
    aten._efficient_attention_backward,
}
_NORM = {
    aten.native_batch_norm,
    aten.native_batch_norm_backward,
    aten.cudnn_batch_norm,
    aten.cudnn_batch_norm_backward,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional,
    aten.batch_norm_backward,
}
_GRADIENT = {
    aten.convolution_backward,
    aten.native_batch_norm_backward,
    aten.cudnn_batch_norm_backward,
    aten.batch_norm_backward,
}
"""The convolutions' and batch norms' backward ops (`OpCost.gradient`)."""
_RNN = {aten._cudnn_rnn, aten.mkldnn_rnn_layer}
_RNN_BACKWARD = {aten._cudnn_rnn_backward, aten.mkldnn_rnn_layer_backward}
_NO_KERNEL = {
    aten.empty,
    aten.empty_strided,
    aten.empty_like,
    aten.detach,
    aten.alias,
    aten.lift_fresh,
    aten._local_scalar_dense,
    aten.set_,
    aten.resize_,
    aten._unsafe_view,
    aten.view,
    aten._reshape_alias,
}
_NAMES = {
    torch.float32: "fp32",
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float64: "fp64",
}
FOREACH_TENSORS_PER_LAUNCH = 110
"""Tensors one multi-tensor-apply launch takes at most (PyTorch's depth_to_max_tensors for a
two-list op; three and four lists take fewer, which this ignores)."""


def _tensors(values: Iterable[Any]) -> Iterable[torch.Tensor]:
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    yield item


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a kernel touches reading or writing `t` (an expanded dimension counts once)."""
    if t.is_contiguous():
        return t.numel() * t.element_size()
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= size
    return n * t.element_size()


def _dtype(tensors: Sequence[torch.Tensor]) -> str:
    """The cost table's name of the first floating tensor's dtype ("int" when none is)."""
    for t in tensors:
        if t.dtype.is_floating_point:
            name = _NAMES.get(t.dtype)
            if name is None:
                known = ", ".join(str(d).removeprefix("torch.") for d in _NAMES)
                raise TraceError(
                    f"no op cost is modelled for dtype {str(t.dtype).removeprefix('torch.')}: "
                    f"the known floating dtypes are {known}"
                )
            return name
    return "int"


def _rnn_flops(func: Any, args: tuple[Any, ...]) -> int:
    """An LSTM's gate matmuls: 2*4*H*(I+H) per time step, sample and direction, per layer;
    backward twice that. Reads the shapes cuDNN's op gets (input, weights, ..., hx)."""
    x = args[0]
    weights = [w for w in args[1] if isinstance(w, torch.Tensor) and w.dim() == 2]
    if not isinstance(x, torch.Tensor) or not weights:
        return 0
    steps = x.numel() // max(1, x.shape[-1])
    per_step = sum(2 * w.shape[0] * w.shape[1] for w in weights)
    # NB: weights of all layers and directions are listed; every (layer, direction) runs over
    # every step and sample, so the sum over the list already counts them all
    total = steps * per_step
    return 2 * total if func._overloadpacket in _RNN_BACKWARD else total


def graph_op(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an op dispatched with these arguments records an autograd node (grad mode on
    and a tensor argument requiring grad)."""
    if not torch.is_grad_enabled():
        return False
    return any(t.requires_grad for t in itertools.chain(_tensors(args), _tensors(kwargs.values())))


def op_cost(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> OpCost:
    """The cost of one dispatched op."""
    packet = func._overloadpacket
    inputs = list(_tensors(args)) + list(_tensors(kwargs.values()))
    graph = graph_op(args, kwargs)
    if packet in _NO_KERNEL or getattr(func, "is_view", False) or func.namespace != "aten":
        return OpCost(OpKind.HOST, _dtype(inputs), 0, 0, 0, graph=graph)
    outputs = (
        [out]
        if isinstance(out, torch.Tensor)
        else list(_tensors(out))
        if isinstance(out, (list, tuple))
        else []
    )
    seen = {id(t) for t in inputs}
    moved = sum(tensor_bytes(t) for t in inputs) + sum(
        tensor_bytes(t) for t in outputs if id(t) not in seen or _writes(func)
    )
    dtype = _dtype(inputs or outputs)
    flops = 0
    if packet in _MATMUL:
        kind = OpKind.MATMUL
    elif packet in _CONV:
        kind = OpKind.CONV
    elif packet in _ATTENTION:
        kind = OpKind.ATTENTION
    elif packet in _RNN or packet in _RNN_BACKWARD:
        kind = OpKind.RNN
        flops = _rnn_flops(func, args)
    elif packet in _NORM:
        kind = OpKind.NORM
    else:
        kind = OpKind.MEMORY
    formula = flop_registry.get(packet)
    if formula is not None:
        try:
            flops = int(formula(*args, **kwargs, out_val=out))
        except Exception:  # a formula that cannot read these shapes counts 0
            flops = 0
    if kind is OpKind.ATTENTION and _argument(func, args, kwargs, "is_causal"):
        # NB: PyTorch's formula counts the full score matrix; a causal kernel skips the
        # blocks above the diagonal, about half
        flops //= 2
    if kind is OpKind.MATMUL:
        detail = 0 if _aligned(inputs + outputs) else 1
    elif kind is OpKind.NORM:
        detail = inputs[0].shape[1] if inputs and inputs[0].dim() > 1 else 0
    elif kind is OpKind.CONV:
        detail = _conv_gemm_side(func, args, kwargs)
    else:
        detail = 0
    shape = _attention_shape(func, args, kwargs) if kind is OpKind.ATTENTION else None
    return OpCost(
        kind, dtype, flops, moved, 1, detail, graph, gradient=packet in _GRADIENT, attention=shape
    )


def _attention_shape(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> AttentionShape | None:
    """A `_scaled_dot_product_*` call's shape, its query (batch, heads, length, head size);
    None for the varlen kernels (`_flash_attention_forward` and kin: (tokens, heads, size))."""
    query = _argument(func, args, kwargs, "query")
    if not func.__name__.startswith("_scaled_dot_product_") or query is None or query.dim() != 4:
        return None
    batch, heads, length, head = query.shape
    key = _argument(func, args, kwargs, "key")
    return AttentionShape(
        problems=int(batch * heads),
        length=int(length),
        head=int(head),
        causal=bool(_argument(func, args, kwargs, "is_causal")),
        dropout=bool(_argument(func, args, kwargs, "dropout_p")),
        backward=func.__name__.split(".")[0].endswith("_backward"),
        keys=int(key.shape[-2]) if isinstance(key, torch.Tensor) else int(length),
    )


def _conv_gemm_side(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """An ungrouped convolution's narrow implicit-GEMM side: for a weight of shape (A, B,
    kernel...), the fewer of A and B times the kernel's size (every spatial extent: 1-D to
    3-D alike); 0 for a grouped or pointwise convolution, or where no weight is found. The
    same for the convolution's forward and its backward (`convolution_backward` takes the
    forward's weight).

    NB: for a convolution, A is its output channels and B its input's: (A, B x kernel) are its
    forward GEMM's columns and reduction and its weight gradient's rows and columns (its input
    gradient's are B and A x kernel). A transposed convolution's weight is (input channels,
    output channels, kernel...): (A, B x kernel) are then its two gradients' sides, its
    forward's being B and A x kernel. The channel curve was read off this side as written,
    transposed rows included (benchmarks/timing/calibrate.py), whichever GEMM it names."""
    weight = _argument(func, args, kwargs, "weight")
    groups = _argument(func, args, kwargs, "groups")
    if not isinstance(weight, torch.Tensor) or weight.dim() < 3 or (groups or 1) != 1:
        return 0
    size = math.prod(weight.shape[2:])
    # NB: a pointwise (1 x 1) convolution is a plain GEMM; the channel curve was read off
    # spatial kernels only, and ResNet-50's pointwise convolutions at 64 channels run at the fit
    return min(weight.shape[0], weight.shape[1] * size) if size > 1 else 0


def _aligned(tensors: Sequence[torch.Tensor]) -> bool:
    """Whether every matrix of a matmul has its leading dimension (the stride between its
    rows or columns) a multiple of 16 bytes, as cuBLAS's fast kernels want; the other
    dimension (tokens, say) does not matter."""
    for t in tensors:
        if t.dim() < 2:
            continue  # a bias
        leading = max(t.stride()[-2:])
        if (leading * t.element_size()) % 16:
            return False
    return True


def _argument(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    """The value of the argument `name` of a call, or None."""
    if name in kwargs:
        return kwargs[name]
    for index, argument in enumerate(func._schema.arguments):
        if argument.name == name:
            return args[index] if index < len(args) else argument.default_value
    return None


def _writes(func: Any) -> bool:
    """Whether the op writes into an argument (an in-place or out= op)."""
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def foreach_cost(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], count: int) -> OpCost:
    """An in-place foreach op: reads every list and writes the first; `count` is its longest
    list's length (`foreach_tensors`)."""
    lists = [a for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple))]
    tensors = [t for lst in lists for t in lst if isinstance(t, torch.Tensor)]
    first = [t for t in lists[0] if isinstance(t, torch.Tensor)] if lists else []
    moved = sum(tensor_bytes(t) for t in tensors) + sum(tensor_bytes(t) for t in first)
    return OpCost(
        OpKind.FOREACH,
        _dtype(first),
        sum(t.numel() for t in first),
        moved,
        foreach_launches(count),
        len(tensors) + len(first),
    )


def foreach_tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The length of a foreach op's longest list (its launches are `foreach_launches` of it)."""
    lists = [a for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple))]
    return max((len(lst) for lst in lists), default=0)


def foreach_launches(count: int) -> int:
    """Kernel launches of a foreach op over lists of `count` tensors."""
    return max(1, math.ceil(count / FOREACH_TENSORS_PER_LAUNCH))


SYNC_COST = OpCost(OpKind.SYNC, "int", 0, 0, 0)
MODULE_CALL = OpCost(OpKind.MODULE, "int", 0, 0, 0)


class CostLog:
    """Collects op costs in dispatch order with the (iteration, phase) they ran in."""

    def __init__(self) -> None:
        self._table: dict[OpCost, int] = {}
        self.by_key: dict[tuple[object, ...], int] = {}
        """Table index of the cost of each output-cache key already seen (the recorder's)."""
        self._order: list[int] = []
        self._segments: list[tuple[int, Phase, int]] = []
        """(iteration, phase, first position in _order) per run of ops in one phase."""
        self._tensors: dict[int, int] = {}
        """A foreach op's list length, by its position in _order (`entries`)."""

    def add(self, cost: OpCost, iteration: int, phase: Phase, tensors: int = 0) -> int:
        """Log `cost`; `tensors`: a foreach op's list length (0 for any other op)."""
        index = self._table.setdefault(cost, len(self._table))
        if tensors:
            self._tensors[len(self._order)] = tensors
        self.add_index(index, iteration, phase)
        return index

    def add_index(self, index: int, iteration: int, phase: Phase) -> None:
        segments = self._segments
        if not segments or segments[-1][0] != iteration or segments[-1][1] is not phase:
            segments.append((iteration, phase, len(self._order)))
        self._order.append(index)

    def entries(self) -> list[tuple[OpCost, int, Phase, int]]:
        """Every op logged, in order, with its iteration, phase and foreach list length (0
        for any other op): `add`ed again in this order, they make this log again."""
        table = list(self._table)
        return [
            (table[self._order[n]], it, phase, self._tensors.get(n, 0))
            for it, phase, start, end in self._spans()
            for n in range(start, end)
        ]

    def _runs(self) -> list[tuple[int, Phase, tuple[int, ...]]]:
        return [(it, phase, tuple(self._order[a:b])) for it, phase, a, b in self._spans()]

    def _spans(self) -> list[tuple[int, Phase, int, int]]:
        """Per run of ops in one phase: its iteration, phase, and first and end positions in
        `_order`."""
        bounds = [s[2] for s in self._segments[1:]] + [len(self._order)]
        return [
            (it, phase, start, end)
            for (it, phase, start), end in zip(self._segments, bounds, strict=True)
        ]

    def step_costs(self, copied: StepCosts | None = None) -> StepCosts | None:
        """The steady micro-batch: the last iteration's first forward and backward when that
        iteration traced them (so that one-off work of the first, such as a reference model
        a user's step copies on its first call, is not a step's), else the first iteration's
        (or `copied`'s when the passes were copied); and the last iteration's optimizer step.
        None when a phase is missing."""
        runs = self._runs()
        # NB: an iteration whose passes were replayed records no forward (only the optimizer
        # and the replay's own bookkeeping): its passes are the first iteration's
        traced = [it for it, p, _ in runs if p is Phase.FORWARD]
        steady = traced[-1] if traced else 0

        def first(phase: Phase) -> tuple[int, ...] | None:
            return next((ops for it, p, ops in runs if p is phase and it == steady), None)

        optimizer = next((ops for _, p, ops in reversed(runs) if p is Phase.OPTIMIZER), ())
        table = list(self._table)
        if copied is not None:
            offset = len(table)
            table.extend(copied.table)
            forward = tuple(i + offset for i in copied.forward)
            backward = tuple(i + offset for i in copied.backward)
        else:
            forward, backward = first(Phase.FORWARD), first(Phase.BACKWARD)
            if forward is None or backward is None:
                return None
        return StepCosts(tuple(table), forward, backward, optimizer)
