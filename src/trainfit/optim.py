"""The optimizers trainfit models: one registered entry per `OptimizerKind`.

Each entry states what the rest of trainfit needs to know about one optimizer: the class that
makes it for a real run, the stand-in a traced step uses instead where the real one cannot run
on fake tensors, the bytes of state it keeps per trainable element, which calibrated host cost
times its step, its names in the Hugging Face and Lightning exports, and which optimizer the
low-memory ladders and QLoRA put in its place. Entries are registered with `@register_optimizer`
(in the manner of `torch.utils.flop_counter`'s formula registry); `optimizer_entry` looks one
up, and an optimizer without an entry is an error listing those with one.

Three factories read the entries:

- `build_optimizer`: the optimizer a user trains with (autofit's `Fit.make_optimizer`): the
  entry's class with the keyword arguments that make it this kind, the caller's on top.
- `measured_optimizer`: the optimizer of trainfit's own measured steps, with PyTorch's defaults
  (which pick the foreach path on CUDA).
- `traced_optimizer`: the optimizer of a traced step, forced onto the path the target takes
  (or the one the spec's `optimizer_path` names: foreach, for-loop, or fused, whose step
  counters PyTorch keeps on the device and whose single kernel makes no temporaries).
  On CUDA, PyTorch's Adam, AdamW and SGD default to their foreach implementation; the traced
  parameters are fake CPU tensors, for which the default would be the for-loop path, so the
  path is passed explicitly. Adafactor takes its for-loop path unless asked (its functional
  `adafactor()` picks foreach only when `foreach=True`; measured on an H100 with torch 2.11:
  14 ops per parameter, the for-loop's count). 8-bit AdamW (bitsandbytes) is a stand-in with
  the same state (`EightBitAdamWStandIn`).

Known limitations:

- A traced step runs PyTorch's own optimizer on fake tensors, so its state is PyTorch's on
  every path (tests/test_optim.py checks it against a real step, tensor for tensor): Adafactor's
  row and column variances for a matrix, a full variance for a vector, its step counters.
- The state bytes per element (the untraced floor) count the buffers as large as the parameter
  only. Adafactor's
  factored second moment (a row and a column per matrix) is counted as 0, though a 1-D parameter
  (a bias, a norm's weight) keeps a full-size `variance`; 8-bit AdamW's fp32 block scales, and
  the fp32 moments it keeps for tensors under 4096 elements, are not counted; nor is the
  per-parameter `step` scalar. Where trainfit traces a step, the trace counts every one.
- The host cost of 8-bit AdamW's step (one fused bitsandbytes kernel per tensor) is read from
  AdamW's calibrated row, and Adam's too: their steps were not calibrated on their own.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainfit.errors import SpecError, TrainfitError, UnknownNameError
from trainfit.hardware.catalog import DeviceKind
from trainfit.spec import LoraSpec, OptimizerKind, OptimizerPath, parse_enum

SGD_MOMENTUM = 0.9
"""Momentum of the sgd-momentum optimizer (the estimate models its buffer, not its value); the
exports write it."""

_BNB_BLOCK = 256
"""bitsandbytes quantises optimizer state in blocks of 256 values, one fp32 absmax each."""
_BNB_MIN_8BIT_SIZE = 4096
"""bitsandbytes keeps 32-bit state for tensors with fewer elements (min_8bit_size)."""


class EightBitAdamWStandIn(torch.optim.Optimizer):
    """bitsandbytes AdamW8bit's device memory: uint8 moments with fp32 block absmax.

    NB: bitsandbytes updates parameters and state in place in one fused kernel, so the step
    allocates nothing beyond the state; the arithmetic is not reproduced (fake tensors only).
    """

    def __init__(self, params: Sequence[nn.Parameter], lr: float = 1e-4) -> None:
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    if p.numel() >= _BNB_MIN_8BIT_SIZE:
                        blocks = -(-p.numel() // _BNB_BLOCK)
                        state["state1"] = torch.zeros_like(p, dtype=torch.uint8)
                        state["state2"] = torch.zeros_like(p, dtype=torch.uint8)
                        state["absmax1"] = torch.zeros(blocks, dtype=torch.float32)
                        state["absmax2"] = torch.zeros(blocks, dtype=torch.float32)
                    else:
                        state["state1"] = torch.zeros_like(p, dtype=torch.float32)
                        state["state2"] = torch.zeros_like(p, dtype=torch.float32)


@dataclass(frozen=True, kw_only=True, slots=True)
class OptimizerEntry:
    """What trainfit knows about one optimizer."""

    kind: OptimizerKind
    """The optimizer this entry describes."""
    class_path: str
    """Its class, as a dotted path (the Lightning and accelerate exports write it)."""
    package: str | None = None
    """The package outside PyTorch that holds the class (pip name); None: torch itself."""
    display: str
    """Its name in sentences."""
    settings: Mapping[str, object] = field(default_factory=dict)
    """Keyword arguments that make the class this kind (SGD's momentum); exports write them."""
    lr: float | None = None
    """Learning rate given when the caller names none; None: the class's own default."""
    step_lr: float
    """Learning rate of trainfit's own measured and traced steps (it changes no memory)."""
    foreach: bool = True
    """Whether PyTorch's default on CUDA is the foreach path (a traced step follows it)."""
    stand_in: type[torch.optim.Optimizer] | None = None
    """What a traced step runs instead of the class (which cannot run on fake tensors)."""
    moments: int = 0
    """State buffers as large as the parameter, in the parameter's dtype."""
    quantised_moments: int = 0
    """State buffers as large as the parameter, one byte per element."""
    host_timed_as: OptimizerKind
    """The optimizer whose calibrated host cost times this one's step."""
    hf_optim: str
    """`transformers.TrainingArguments.optim` for it."""
    fused: bool = False
    """Whether exports for a CUDA GPU ask for its fused kernel (`fused=True`, HF's `_fused`)."""
    fused_kernel: bool = False
    """Whether the class takes `fused=True` (a traced step can follow `OptimizerPath.FUSED`)."""
    eight_bit: OptimizerKind | None = None
    """The optimizer with 8-bit state that the low-memory ladders offer in its place."""
    under_qlora: OptimizerKind | None = None
    """What QLoRA's recipe trains with in its place (paged 8-bit AdamW for AdamW)."""

    def state_bytes_per_element(self, dtype_bytes: int) -> int:
        """Bytes of state per trainable element whose parameter has `dtype_bytes` per element
        (a lower bound: see the module's known limitations)."""
        return self.moments * dtype_bytes + self.quantised_moments

    def hf_name(self, device_kind: DeviceKind) -> str:
        """`TrainingArguments.optim` on a device of `device_kind`: the fused kernel on CUDA."""
        return (
            f"{self.hf_optim}_fused"
            if self.fused and device_kind is DeviceKind.CUDA
            else self.hf_optim
        )

    def hf_optim_args(self) -> str | None:
        """`TrainingArguments.optim_args` ("momentum=0.9"); None when it needs none."""
        if not self.settings:
            return None
        return ",".join(f"{k}={v}" for k, v in self.settings.items())

    @property
    def class_name(self) -> str:
        """The class's own name ("AdamW")."""
        return self.class_path.rsplit(".", 1)[-1]

    @property
    def short_name(self) -> str:
        """The class's name, with its package when not PyTorch's ("AdamW8bit (bitsandbytes)")."""
        return f"{self.class_name} ({self.package})" if self.package else self.class_name

    def installed(self) -> bool:
        """Whether the class can be imported here."""
        return self.package is None or importlib.util.find_spec(self.package) is not None

    def optimizer_class(self) -> type[torch.optim.Optimizer]:
        """The class, imported; SpecError naming the install command when it cannot be."""
        if not self.installed():
            raise SpecError(
                [
                    f"{self.display} needs {self.package}, which is not installed: "
                    f"pip install {self.package}"
                ]
            )
        module, name = self.class_path.rsplit(".", 1)
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


_REGISTRY: dict[OptimizerKind, OptimizerEntry] = {}


def register_optimizer(
    make: Callable[[], OptimizerEntry],
) -> Callable[[], OptimizerEntry]:
    """Register the entry `make` returns (one per kind)."""
    entry = make()
    if entry.kind in _REGISTRY:
        raise TrainfitError(f"optimizer {entry.kind.value!r} is registered twice")
    _REGISTRY[entry.kind] = entry
    return make


@register_optimizer
def _adamw() -> OptimizerEntry:
    return OptimizerEntry(
        kind=OptimizerKind.ADAMW,
        class_path="torch.optim.AdamW",
        display="AdamW",
        step_lr=1e-4,
        moments=2,
        host_timed_as=OptimizerKind.ADAMW,
        hf_optim="adamw_torch",
        fused=True,
        eight_bit=OptimizerKind.ADAMW_8BIT,
        under_qlora=OptimizerKind.ADAMW_8BIT,
        fused_kernel=True,
    )


@register_optimizer
def _adam() -> OptimizerEntry:
    # NB: Hugging Face has no plain Adam: AdamW with its default weight decay 0 is Adam
    return OptimizerEntry(
        kind=OptimizerKind.ADAM,
        class_path="torch.optim.Adam",
        display="Adam",
        step_lr=1e-4,
        moments=2,
        host_timed_as=OptimizerKind.ADAMW,
        hf_optim="adamw_torch",
        fused=True,
        eight_bit=OptimizerKind.ADAMW_8BIT,
        fused_kernel=True,
    )


@register_optimizer
def _sgd() -> OptimizerEntry:
    return OptimizerEntry(
        kind=OptimizerKind.SGD,
        class_path="torch.optim.SGD",
        display="SGD",
        lr=1e-3,
        step_lr=1e-3,
        host_timed_as=OptimizerKind.SGD,
        hf_optim="sgd",
        fused_kernel=True,
    )


@register_optimizer
def _sgd_momentum() -> OptimizerEntry:
    return OptimizerEntry(
        kind=OptimizerKind.SGD_MOMENTUM,
        class_path="torch.optim.SGD",
        display="SGD with momentum",
        settings={"momentum": SGD_MOMENTUM},
        lr=1e-3,
        step_lr=1e-3,
        moments=1,
        host_timed_as=OptimizerKind.SGD_MOMENTUM,
        hf_optim="sgd",
        fused_kernel=True,
    )


@register_optimizer
def _adafactor() -> OptimizerEntry:
    return OptimizerEntry(
        kind=OptimizerKind.ADAFACTOR,
        class_path="torch.optim.Adafactor",
        display="Adafactor",
        step_lr=1e-3,
        foreach=False,
        host_timed_as=OptimizerKind.ADAFACTOR,
        hf_optim="adafactor",
    )


@register_optimizer
def _adamw_8bit() -> OptimizerEntry:
    return OptimizerEntry(
        kind=OptimizerKind.ADAMW_8BIT,
        class_path="bitsandbytes.optim.AdamW8bit",
        package="bitsandbytes",
        display="8-bit AdamW",
        step_lr=1e-4,
        stand_in=EightBitAdamWStandIn,
        quantised_moments=2,
        host_timed_as=OptimizerKind.ADAMW,
        hf_optim="adamw_bnb_8bit",
    )


def optimizer_entry(kind: OptimizerKind) -> OptimizerEntry:
    """The registered entry of `kind`; an error listing the registered ones if it has none."""
    entry = _REGISTRY.get(kind)
    if entry is None:
        raise UnknownNameError("optimizer", str(getattr(kind, "value", kind)), list(_names()))
    return entry


def optimizer_entries() -> tuple[OptimizerEntry, ...]:
    """Every registered entry, in `OptimizerKind` order."""
    return tuple(_REGISTRY[k] for k in OptimizerKind if k in _REGISTRY)


def _names() -> list[str]:
    return [e.kind.value for e in optimizer_entries()]


def effective_optimizer(kind: OptimizerKind, lora: LoraSpec | None) -> OptimizerKind:
    """The optimizer a step of `kind` trains with: QLoRA's recipe trains with paged 8-bit
    AdamW, so AdamW becomes 8-bit AdamW under QLoRA."""
    if lora is not None and lora.qlora:
        return optimizer_entry(kind).under_qlora or kind
    return kind


def optimizer_kind(optimizer: torch.optim.Optimizer | str | OptimizerKind) -> OptimizerKind:
    """The modelled kind of an optimizer instance or of its name."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        kind = parse_enum(OptimizerKind, "optimizer", optimizer)
        return optimizer_entry(kind).kind  # type: ignore[arg-type]
    name = type(optimizer).__name__
    # NB: bitsandbytes' classes are matched by name (AdamW8bit, PagedAdamW8bit), so that
    # bitsandbytes is not imported
    if "8bit" in name and "AdamW" in name:
        return OptimizerKind.ADAMW_8BIT
    # NB: the nearest class in the instance's MRO decides (AdamW before its base Adam); SGD
    # with momentum is sgd-momentum
    momentum = bool(optimizer.defaults.get("momentum", 0))
    for cls in type(optimizer).__mro__:
        for entry in optimizer_entries():
            if entry.package is not None or entry.optimizer_class() is not cls:
                continue
            if bool(entry.settings.get("momentum", 0)) == momentum:
                return entry.kind
    raise SpecError(
        [
            f"optimizer {type(optimizer).__module__}.{name} is not modelled: give the closest of "
            "torch.optim.AdamW, Adam, SGD, Adafactor or bitsandbytes' AdamW8bit, or its name "
            f"({', '.join(_names())})"
        ]
    )


def build_optimizer(
    kind: OptimizerKind,
    params: Sequence[nn.Parameter],
    like: torch.optim.Optimizer | None = None,
    **kwargs: Any,
) -> torch.optim.Optimizer:
    """An optimizer of `kind` over `params`; of `like`'s class and defaults when given (and
    of that kind). Keyword arguments go to its constructor, over the entry's."""
    if like is not None and optimizer_kind(like) is kind:
        accepted = inspect.signature(type(like).__init__).parameters
        # NB: `defaults` may hold derived keys the constructor does not take (AdamW's
        # decoupled_weight_decay)
        defaults = {k: v for k, v in like.defaults.items() if k in accepted}
        return type(like)(params, **{**defaults, **kwargs})
    entry = optimizer_entry(kind)
    given: dict[str, Any] = {**entry.settings}
    if entry.lr is not None:
        given["lr"] = entry.lr
    return entry.optimizer_class()(params, **{**given, **kwargs})


def measured_optimizer(
    kind: OptimizerKind, params: list[nn.Parameter], path: OptimizerPath = OptimizerPath.AUTO
) -> torch.optim.Optimizer:
    """The optimizer of trainfit's own measured steps, with PyTorch's defaults (which pick
    foreach on CUDA) unless `path` names one; one outside PyTorch is refused (trainfit measure
    does not drive it)."""
    entry = optimizer_entry(kind)
    if entry.package is not None:
        raise TrainfitError(
            f"optimizer {kind.value!r} needs {entry.package} for a real run; "
            "it is modelled in estimates only"
        )
    chosen = path_arguments(entry, path, default_foreach=None)
    return entry.optimizer_class()(params, **{**entry.settings, "lr": entry.step_lr, **chosen})


def path_arguments(
    entry: OptimizerEntry, path: OptimizerPath, default_foreach: bool | None
) -> dict[str, bool]:
    """The keyword arguments that put `entry`'s class on `path` (`default_foreach` for auto:
    None leaves PyTorch's own choice); SpecError where the class has no such path."""
    if path is OptimizerPath.FUSED:
        if not entry.fused_kernel:
            with_fused = ", ".join(e.kind.value for e in optimizer_entries() if e.fused_kernel)
            raise SpecError(
                [
                    f"{entry.display} has no fused implementation in PyTorch; the fused path is "
                    f"for {with_fused} (or choose optimizer path auto, foreach or for-loop)"
                ]
            )
        return {"fused": True, "foreach": False}
    if path is not OptimizerPath.AUTO and entry.stand_in is not None:
        raise SpecError(
            [f"{entry.display} has one implementation: give optimizer path auto, not {path.value}"]
        )
    if path is OptimizerPath.FOREACH:
        return {"foreach": True}
    if path is OptimizerPath.FOR_LOOP:
        return {"foreach": False}
    return {} if default_foreach is None else {"foreach": default_foreach}


def run_path(kind: OptimizerKind, path: OptimizerPath, target_foreach: bool) -> OptimizerPath:
    """The path a step of `kind` runs: `path`, or for auto the target's default (foreach where
    both the target and the optimizer default to it, else the for-loop)."""
    if path is not OptimizerPath.AUTO:
        return path
    if target_foreach and optimizer_entry(kind).foreach:
        return OptimizerPath.FOREACH
    return OptimizerPath.FOR_LOOP


def traced_optimizer(
    kind: OptimizerKind,
    params: list[nn.Parameter],
    foreach: bool,
    path: OptimizerPath = OptimizerPath.AUTO,
) -> torch.optim.Optimizer:
    """The optimizer of a traced step over `params` on `path`; for auto, forced onto the foreach
    or for-loop path (the for-loop path where the target's default is not foreach); its
    stand-in if it has one."""
    entry = optimizer_entry(kind)
    default = run_path(kind, OptimizerPath.AUTO, foreach) is OptimizerPath.FOREACH
    chosen = path_arguments(entry, path, default_foreach=default)
    if entry.stand_in is not None:
        return entry.stand_in(params, lr=entry.step_lr)  # type: ignore[call-arg]
    return entry.optimizer_class()(params, **{**entry.settings, "lr": entry.step_lr, **chosen})
