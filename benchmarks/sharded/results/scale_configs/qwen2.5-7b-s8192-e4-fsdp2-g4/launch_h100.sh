#!/usr/bin/env bash
# trainfit plan for qwen2.5-7b on h100: fsdp2 over 4 GPU(s) on 1 node(s), micro-batch 1 x 1 accumulation, 52.8 GiB per GPU (modelled)
set -euo pipefail
torchrun --standalone --nnodes=1 --nproc-per-node=4 train_fsdp2.py --config fsdp2_h100.json "$@"
