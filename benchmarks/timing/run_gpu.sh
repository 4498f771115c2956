#!/bin/sh
# The step-time calibration and check on one GPU (the device tool runs this from the repo root).
set -e
export PYTHONPATH=src:.
python -m benchmarks.timing.microbench --out "$OUT"
python -m benchmarks.timing.measure_gpu --out "$OUT"
