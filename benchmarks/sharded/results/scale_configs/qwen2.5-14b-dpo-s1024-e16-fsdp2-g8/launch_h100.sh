#!/usr/bin/env bash
# trainfit plan for qwen2.5-14b on h100: fsdp2 over 8 GPU(s) on 1 node(s), micro-batch 1 x 2 accumulation, 67.8 GiB per GPU (modelled)
set -euo pipefail
torchrun --standalone --nnodes=1 --nproc-per-node=8 train_fsdp2.py --config fsdp2_h100.json "$@"
