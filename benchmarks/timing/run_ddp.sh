#!/bin/sh
# Data-parallel step times: one GPU (no DDP) and two GPUs with DDP (the device tool runs this).
set -e
export PYTHONPATH=src:.
python -m benchmarks.timing.measure_ddp --out "$OUT"
torchrun --standalone --nproc-per-node 2 -m benchmarks.timing.measure_ddp --out "$OUT"
nvidia-smi topo -m > "$OUT/topology.txt" 2>&1 || true
