"""The tracer's set-up, one for every traced program: the training step, the inference
forward and the start of generation.

`tracing(model, target, autocast_dtype)` makes the model's meta parameters and buffers fake
CPU tensors and runs the block with, from the outside in: the garbage collector paused, the
target's rules installed (autocast emulation, attention routing), cuDNN's LSTM and convolution
emulated on a CUDA target, FakeTensorMode's error log silenced, FakeTensorMode, the `Recorder`,
the module path tracked for errors and costs, transformers kept on its eager paths, and (for
serving) `torch.no_grad()`. It yields a `Tracer`; when the block ends the recorder is finished.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.errors import (
    USER_CODE_ERRORS,
    TraceError,
    TrainfitError,
    raised_in_user_code,
    user_frame,
)
from trainfit.hardware.catalog import DeviceKind
from trainfit.trace.collector import collector_paused
from trainfit.trace.compat import internal_moved
from trainfit.trace.convert import conversions_in_place
from trainfit.trace.costs import MODULE_CALL
from trainfit.trace.kernels.cudnn_conv import CudnnConv
from trainfit.trace.kernels.cudnn_rnn import LIBRARY_OP, CudnnLstm
from trainfit.trace.recorder import Recorder
from trainfit.trace.target import Target, TargetRules


@dataclass(frozen=True, slots=True)
class Tracer:
    """What a traced block works with."""

    recorder: Recorder
    rules: TargetRules
    """The target's rules (its autocast region, the attention kernels it chose)."""
    cudnn: CudnnLstm | None
    """cuDNN's LSTM emulation on a CUDA target (its flat weights are made at `model.to`)."""

    def track_weights(self, tensors: Iterable[torch.Tensor]) -> list[int]:
        """Record each distinct storage of `tensors` as allocated by `model.to(device)`, in
        order; return their keys."""
        keys = []
        seen: set[int] = set()
        for tensor in tensors:
            storage = id(tensor.untyped_storage())
            if storage in seen:
                continue
            seen.add(storage)
            key = self.recorder.track(tensor, "model.to(device)")
            if key is not None:
                keys.append(key)
        return keys

    def library_keys(self) -> list[int]:
        """Keys of the storages a library allocated for itself (cuDNN's workspaces)."""
        return [e.key for e in self.recorder.events if e.alloc and e.op.startswith(LIBRARY_OP)]

    def failures(self, what: str, advice: str) -> contextlib.AbstractContextManager[None]:
        """`traced_failures` for this tracer's recorder."""
        return traced_failures(self.recorder, what, advice)


@contextlib.contextmanager
def tracing(
    model: nn.Module,
    target: Target,
    autocast_dtype: torch.dtype | None,
    *,
    transformers: bool,
    grad: bool = True,
) -> Iterator[Tracer]:
    """Trace the block as `target` runs it (see the module docstring); `transformers`: the
    model is a transformers model; `grad=False`: the block runs under `torch.no_grad()`."""
    try:
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        _fakeify(model, mode)
    except (AttributeError, ImportError) as exc:
        raise internal_moved(exc) from exc
    # NB: what the rules install below the recorder depends on the target and autocast dtype
    recorder = Recorder(scope=(target, autocast_dtype), fake_mode=mode)  # NB: entered below it
    rules = target.rules(autocast_dtype)
    cudnn = CudnnLstm(recorder) if target.kind is DeviceKind.CUDA else None
    with contextlib.ExitStack() as stack:
        # NB: frees are recorded when a storage's last reference goes; a collection of
        # reference cycles mid-trace would add frees at a moment that depends on the process's
        # allocation history, so traces of one program could differ: the collector waits
        stack.enter_context(collector_paused())
        try:
            stack.enter_context(rules.installed())
        except (AttributeError, ImportError) as exc:
            raise internal_moved(exc) from exc
        if cudnn is not None:
            stack.enter_context(cudnn.installed())
            stack.enter_context(CudnnConv(recorder).installed())
        stack.enter_context(_quiet_fake_tensor_log())
        stack.enter_context(mode)
        stack.enter_context(recorder)
        stack.enter_context(_module_tracking(recorder, model))
        stack.enter_context(conversions_in_place())
        if transformers:
            stack.enter_context(_not_tracing_for_transformers())
        if not grad:
            stack.enter_context(torch.no_grad())
        yield Tracer(recorder, rules, cudnn)
    # NB: frees after this (a cycle the garbage collector breaks later) are not the trace's
    recorder.finish()


@contextlib.contextmanager
def traced_failures(recorder: Recorder, what: str, advice: str) -> Iterator[None]:
    """Turn a failure of the model's code under the tracer into one TraceError naming the module
    it happened in: an op without a data-free implementation, or `what` failing (with `advice`).
    trainfit's own errors pass through."""
    try:
        yield
    except TraceError as exc:
        # NB: an op that failed under the user's code: the user's line that called it
        where = user_frame(exc)
        if where is None or "(at " in str(exc):
            raise
        raise TraceError(f"{exc} (at {where})") from exc
    except TrainfitError:
        raise
    except NotImplementedError as exc:
        where = f" in module {recorder.module_path!r}" if recorder.module_path else ""
        raise TraceError(
            f"an op{where} has no implementation the tracer can run without data ({exc}); "
            "measure this model on the device instead (trainfit measure)"
        ) from exc
    except USER_CODE_ERRORS as exc:  # NB: the user's code may raise anything (an assert, exit)
        where = f" in module {recorder.module_path!r}" if recorder.module_path else ""
        raise TraceError(f"{what} failed{where}: {raised_in_user_code(exc)}; {advice}") from exc


@contextlib.contextmanager
def _quiet_fake_tensor_log() -> Iterator[None]:
    """Silence the tracebacks FakeTensorMode logs for an op that fails (an absurd batch's
    overflow among them): the failure is raised as one TraceError line."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


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
