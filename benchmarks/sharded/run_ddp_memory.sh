#!/usr/bin/env bash
# The DDP memory study on 2 GPUs of this host (benchmarks/sharded/ddp_memory.py): one torchrun per
# case, rank 0's allocator history summarised at its peak.
# Usage: benchmarks/sharded/run_ddp_memory.sh OUTDIR [CASE ...]   (CASE = name:config:init)
set -u
out=${1:?give an output directory}; shift
r=benchmarks/sharded/results
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  cases=(
    "llama-3.2-1b-s1024-b2-ddp-meta:$r/scale_configs/llama-3.2-1b-s1024-e8-ddp-g4/fsdp2_h100.json:meta"
    "llama-3.2-1b-s1024-b2-ddp-cpu:$r/scale_configs/llama-3.2-1b-s1024-e8-ddp-g4/fsdp2_h100.json:cpu"
    "qwen2-0.5b-s1024-b2-ddp-cpu:$r/multigpu_configs/fsdp2_qwen2-0.5b-s1024-b2-ddp.json:cpu"
    "llama-3.2-1b-s1024-b2-ckpt-ddp-cpu:$r/multigpu_heldout_configs/fsdp2_llama-3.2-1b-s1024-b2-ckpt-ddp.json:cpu"
    "qwen2-0.5b-s1024-b2-ddp-meta:$r/multigpu_configs/fsdp2_qwen2-0.5b-s1024-b2-ddp.json:meta"
    "gpt2-medium-s1024-b4-ddp-cpu:$r/multigpu_configs/fsdp2_gpt2-medium-s1024-b4-ddp.json:cpu"
  )
fi
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
for item in "${cases[@]}"; do
  IFS=: read -r name config init <<< "$item"
  start=$(date +%s)
  PYTHONPATH=src:. timeout 110 python -m torch.distributed.run --standalone --nproc-per-node=2 \
    benchmarks/sharded/ddp_memory.py --config "$config" --init "$init" --out "$out/$name.json" \
    > "$out/$name.log" 2>&1 || echo "$name failed: $(tail -3 "$out/$name.log")"
  echo "$name $(( $(date +%s) - start )) s"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/nvidia_smi.txt" 2>&1
