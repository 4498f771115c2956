"""oneDNN's LSTM on the CPU: the training workspace PyTorch's meta kernel leaves out.

CPU PyTorch trains `nn.LSTM` through oneDNN (`aten.mkldnn_rnn_layer`, one call per layer and
direction), which returns a uint8 workspace that backward reads; the meta kernel that fake
tensors run returns it empty. Its size depends on oneDNN's internal layout (gates, states,
cell states, each page-aligned), so it is asked of the local oneDNN: the real op runs once on
zero inputs of the same sizes, at two batch sizes, and the workspace is extrapolated linearly
in the batch.

Known limitations: only the forward workspace is modelled; oneDNN's backward scratchpad is
part of the CPU runtime constant.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cache
from typing import Any

import torch
from torch._meta_registrations import mkldnn_rnn_layer as _meta_rnn_layer
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._python_dispatch import _disable_current_modes

from trainfit.trace.compat import registered

aten = torch.ops.aten

_PROBE_BATCHES = (8, 16)
"""Batch sizes the real op is probed at (the workspace is linear in the batch)."""


@cache
def workspace_bytes(
    steps: int,
    batch: int,
    input_size: int,
    hidden_size: int,
    dtype: torch.dtype,
    has_biases: bool,
    reverse: bool,
) -> int:
    """oneDNN's LSTM training workspace for one layer and direction, asked of the local oneDNN.

    NB: probed at batch 8 and 16 and extrapolated linearly; each of oneDNN's workspace parts is
    page-aligned, so other batches may be off by a few pages.
    """
    sizes = [
        _probe(steps, b, input_size, hidden_size, dtype, has_biases, reverse)
        for b in _PROBE_BATCHES
    ]
    low, high = _PROBE_BATCHES
    per_sample = (sizes[1] - sizes[0]) / (high - low)
    return max(0, round(sizes[0] + (batch - low) * per_sample))


def _probe(
    steps: int,
    batch: int,
    input_size: int,
    hidden_size: int,
    dtype: torch.dtype,
    has_biases: bool,
    reverse: bool,
) -> int:
    with _real_tensors():
        x = torch.zeros(steps, batch, input_size, dtype=dtype)
        w_ih = torch.zeros(4 * hidden_size, input_size, dtype=dtype)
        w_hh = torch.zeros(4 * hidden_size, hidden_size, dtype=dtype)
        b_ih = torch.zeros(4 * hidden_size, dtype=dtype)
        b_hh = torch.zeros(4 * hidden_size, dtype=dtype)
        h = torch.zeros(batch, hidden_size, dtype=dtype)
        c = torch.zeros(batch, hidden_size, dtype=dtype)
        out = aten.mkldnn_rnn_layer(
            x,
            w_ih,
            w_hh,
            b_ih,
            b_hh,
            h,
            c,
            reverse,
            [],
            2,
            hidden_size,
            1,
            has_biases,
            False,
            False,
            True,
        )
        return int(out[3].untyped_storage().nbytes())


@contextlib.contextmanager
def _real_tensors() -> Iterator[None]:
    """Leave fake-tensor mode, every dispatch mode and the meta dispatch that a meta kernel
    runs under, so that the probe runs the real CPU kernel."""
    meta = torch._C._meta_in_tls_dispatch_include()
    torch._C._set_meta_in_tls_dispatch_include(False)
    try:
        with unset_fake_temporarily(), _disable_current_modes():
            yield
    finally:
        torch._C._set_meta_in_tls_dispatch_include(meta)


def _rnn_layer_with_workspace(
    input: torch.Tensor,
    w0: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    w3: torch.Tensor,
    hx_: torch.Tensor | None,
    cx_: torch.Tensor | None,
    reverse: bool,
    batch_sizes: Any,
    mode: int,
    hidden_size: int,
    num_layers: int,
    has_biases: bool,
    bidirectional: bool,
    batch_first: bool,
    train: bool,
) -> tuple[torch.Tensor, ...]:
    output, hy, cy, workspace = _meta_rnn_layer(
        input,
        w0,
        w1,
        w2,
        w3,
        hx_,
        cx_,
        reverse,
        batch_sizes,
        mode,
        hidden_size,
        num_layers,
        has_biases,
        bidirectional,
        batch_first,
        train,
    )
    if not train:
        return output, hy, cy, workspace
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    size = workspace_bytes(
        int(steps),
        int(batch),
        int(input.shape[-1]),
        hidden_size,
        input.dtype,
        has_biases,
        reverse,
    )
    return output, hy, cy, torch.empty(size, dtype=torch.uint8, device=input.device)


@contextlib.contextmanager
def onednn_lstm_workspace() -> Iterator[None]:
    """Give `aten.mkldnn_rnn_layer`'s meta kernel oneDNN's real workspace for the block."""
    with registered("Meta", {"mkldnn_rnn_layer": _rnn_layer_with_workspace}):
        yield
