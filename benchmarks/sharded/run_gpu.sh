#!/usr/bin/env bash
# Every sharded case on the GPUs of this host: FSDP2 over 2 GPUs, FSDP2 on 1 GPU, and 1 GPU
# with CPU offload; one fresh torchrun per run. Usage: benchmarks/sharded/run_gpu.sh OUTDIR
set -u
out=${1:?give an output directory}
mkdir -p "$out"
cases=$(PYTHONPATH=src:. python -c "from benchmarks.sharded.cases import CASES; print(' '.join(CASES))")
for case in $cases; do
  for run in "2 shard" "1 shard" "1 offload"; do
    set -- $run
    flag=""; [ "$2" = offload ] && flag="--offload"
    PYTHONPATH=src:. timeout 150 python -m torch.distributed.run --standalone --nproc_per_node="$1" \
      -m benchmarks.sharded.measure_fsdp --case "$case" $flag \
      --out "$out/${case}__$1gpu_$2.json" > "$out/${case}__$1gpu_$2.log" 2>&1 \
      || echo "$case $1 $2 failed: $(tail -3 "$out/${case}__$1gpu_$2.log")"
  done
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/nvidia_smi.txt"
# one file with every run (the device tool brings back few files)
python - "$out" <<'PY'
import glob, json, os, sys
d = sys.argv[1]
runs = {os.path.basename(f)[:-5]: json.load(open(f)) for f in sorted(glob.glob(f"{d}/*__*.json"))}
smi = open(f"{d}/nvidia_smi.txt").read().strip().splitlines()
json.dump({"nvidia_smi": smi, "runs": runs}, open(f"{d}/measured.json", "w"), indent=1)
PY
