"""Measure the rates the step-time model is calibrated with, on the CUDA GPU at hand.

    PYTHONPATH=src:. python -m benchmarks.timing.microbench --out DIR

Nothing here is a training step of the accuracy suite: these are single kernels and host
loops, so the step-time table stays held out. Writes DIR/microbench.json:
- matmul: achieved FLOP/s of torch.mm per dtype (bf16, fp16, fp32 without tf32, tf32) over
  square and transformer-shaped problems;
- memory: achieved bytes/s of a copy and an in-place add over sizes from 4 KiB to 1 GiB
  (the smallest give the shortest time a kernel takes back to back);
- attention: flash/efficient SDPA forward and backward;
- conv: 3x3 and 1x1 convolutions forward and backward, bf16 and tf32;
- host: seconds the host spends per op issuing tiny ops (forward), per op of backward, and
  per module call, none waiting for the device;
- host_training: the same as a training step issues ops: modules whose forward records
  autograd nodes, their backward, a convolution, each optimizer's step, GradScaler's step;
- lstm: cuDNN LSTM forward and forward+backward over a grid of shapes (time per time step);
- memory_mix: the memory-bound kernels of a step (layer norm and its backward, GELU, softmax,
  dropout, add, a transposing copy, a cast, a reduction) at transformer sizes;
- optimizer_sizes: host time of optimizer steps over 4 and 256 tensors (fixed and per-tensor);
- conv_more: more convolutions (fp16, 1-D, small images);
- batch_norm: BatchNorm forward and backward in training (NCHW and 1-D), back to back;
- matmul_aligned: vocabulary-sized matmuls with the size a multiple of 8 or not (cuBLAS picks
  slower kernels for unaligned sizes), back to back;
- foreach: multi-tensor kernels over short and long lists, back to back;
- memory_stream: memory_mix's kernels back to back (launch latency hidden) at four sizes;
- batch_norm_channels: training BatchNorm of ~32M elements over 16 to 2048 channels;
- host_modules: the host cost of a module call beyond its op (65 calls of a one-op module);
- sync: the host cost of reading a device value back (`.item()` after a tiny reduction);
- host_library: host time per call of convolution, transposed convolution and BatchNorm,
  forward and forward+backward, at tiny sizes (the host is the limit);
- host_torch_modules: host time per forward of nn.MultiheadAttention and the
  Transformer encoder and decoder layers, whose Python issues no op for much of its time.

This module runs them; the measurements live in the sibling modules `microbench_matmul`
(matmul, attention, matmul_aligned), `microbench_memory` (memory, memory_mix, foreach,
memory_stream), `microbench_cudnn` (conv, lstm, conv_more, batch_norm, batch_norm_channels)
and `microbench_host` (host, host_training, optimizer_sizes, host_modules, sync, host_library,
host_torch_modules), their timers in `microbench_timers`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.timing.microbench_cudnn import (
    _batch_norm,
    _batch_norm_channels,
    _conv,
    _conv_more,
    _lstm,
)
from benchmarks.timing.microbench_host import (
    _host,
    _host_library,
    _host_modules,
    _host_torch_modules,
    _host_training,
    _optimizer_sizes,
    _sync,
)
from benchmarks.timing.microbench_matmul import _attention, _matmul, _matmul_aligned
from benchmarks.timing.microbench_memory import _foreach, _memory, _memory_mix, _memory_stream


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from benchmarks.accuracy.measure_gpu import _environment

    result: dict[str, Any] = {"environment": _environment()}
    for name, fn in (
        ("host", _host),
        ("memory", _memory),
        ("matmul", _matmul),
        ("attention", _attention),
        ("conv", _conv),
        ("host_training", _host_training),
        ("lstm", _lstm),
        ("memory_mix", _memory_mix),
        ("optimizer_sizes", _optimizer_sizes),
        ("conv_more", _conv_more),
        ("batch_norm", _batch_norm),
        ("matmul_aligned", _matmul_aligned),
        ("foreach", _foreach),
        ("memory_stream", _memory_stream),
        ("batch_norm_channels", _batch_norm_channels),
        ("host_modules", _host_modules),
        ("sync", _sync),
        ("host_library", _host_library),
        ("host_torch_modules", _host_torch_modules),
    ):
        if args.only and name not in args.only.split(","):
            continue
        start = time.perf_counter()
        result[name] = fn()
        print(f"{name}: {time.perf_counter() - start:.1f} s", flush=True)
        (out / "microbench.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
