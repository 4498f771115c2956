#!/usr/bin/env bash
# Every multi-GPU case on 2 GPUs of this host with the emitted template: one torchrun per case
# (DDP, FSDP2, FSDP2 hybrid on a (1, 2) mesh), three steps each.
# Usage: benchmarks/sharded/run_multigpu.sh OUTDIR [CONFIGDIR] [cpu]
# (CONFIGDIR defaults to the committed benchmarks/sharded/results/multigpu_configs; with cpu
# it runs on the CPU with gloo, for the configs of `multigpu configs --tiny`.)
set -u
out=${1:?give an output directory}
configs=${2:-benchmarks/sharded/results/multigpu_configs}
device=${3:-cuda}
mkdir -p "$out"
for config in "$configs"/fsdp2_*.json; do
  case=$(basename "$config" .json); case=${case#fsdp2_}
  flag=""; [ "$device" = cpu ] && flag="--device cpu"
  PYTHONPATH=src:. timeout 150 python -m torch.distributed.run --standalone --nproc-per-node=2 \
    src/trainfit/export/templates/train_fsdp2.py --config "$config" --steps 3 $flag \
    --out "$out/$case.json" > "$out/$case.log" 2>&1 \
    || echo "$case failed: $(tail -3 "$out/$case.log")"
done
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/nvidia_smi.txt"
else
  echo "no GPU" > "$out/nvidia_smi.txt"
fi
python - "$out" <<'PY'
import glob, json, os, sys
import transformers
d = sys.argv[1]
runs = {os.path.basename(f)[:-5]: json.load(open(f)) for f in sorted(glob.glob(f"{d}/*.json"))
        if not f.endswith("multigpu_measured.json")}
smi = open(f"{d}/nvidia_smi.txt").read().strip().splitlines()
json.dump({"nvidia_smi": smi, "transformers": transformers.__version__, "runs": runs},
          open(f"{d}/multigpu_measured.json", "w"), indent=1)
PY
