#!/usr/bin/env bash
# trainfit plan for qwen2.5-7b on h100: fsdp2 over 8 GPU(s) on 1 node(s), micro-batch 2 x 1 accumulation, 57.0 GiB per GPU (modelled)
set -euo pipefail
torchrun --standalone --nnodes=1 --nproc-per-node=8 train_fsdp2.py --config fsdp2_h100.json "$@"
