#!/usr/bin/env bash
# trainfit plan for llama-3.2-1b on h100: ddp over 8 GPU(s) on 1 node(s), micro-batch 2 x 1 accumulation, 33.2 GiB per GPU (modelled)
set -euo pipefail
torchrun --standalone --nnodes=1 --nproc-per-node=8 train_fsdp2.py --config fsdp2_h100.json "$@"
