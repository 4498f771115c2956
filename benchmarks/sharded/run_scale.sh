#!/usr/bin/env bash
# The multi-GPU cases of benchmarks/sharded/scale.py with GPUS GPUs, each through the
# launch_h100.sh that `trainfit plan --export torchrun` wrote, then the NCCL probe.
# Usage: benchmarks/sharded/run_scale.sh OUT GPUS [CONFIGDIR] [cpu]
# (CONFIGDIR defaults to the committed benchmarks/sharded/results/scale_configs; with cpu the
# runs go to the CPU with gloo, for the configs of `scale configs --tiny`: a dry run.)
# OUT gets scale_measured.json (every run, the probe, versions, nvidia-smi, topology) and
# logs.tar.gz, rewritten after each case.
set -u
out=${1:?give an output directory}
gpus=${2:?give the GPU count}
configs=$(realpath "${3:-benchmarks/sharded/results/scale_configs}")
device=${4:-cuda}
steps=${STEPS:-5}
root=$(pwd)
runs=$(mktemp -d)
mkdir -p "$out"
merge() {
  python - "$runs" "$out" <<'PY'
import glob, json, os, subprocess, sys
runs, out = sys.argv[1], sys.argv[2]
def load(pattern):
    return {os.path.basename(f)[:-5]: json.load(open(f)) for f in sorted(glob.glob(pattern))}
try:
    import transformers
    version = transformers.__version__
except ImportError:
    version = "not installed"
topo = os.path.join(runs, "topology.txt")
record = {
    "transformers": version,
    "nvls": os.environ.get("NCCL_NVLS_ENABLE", "unset"),
    "topology": open(topo).read() if os.path.exists(topo) else "",
    "runs": {k: v for k, v in load(f"{runs}/*.json").items() if not k.startswith("probe-")},
    "probes": load(f"{runs}/probe-*.json"),
}
json.dump(record, open(f"{out}/scale_measured.json", "w"), indent=1)
subprocess.run(["tar", "-czf", f"{out}/logs.tar.gz", "-C", runs, "."], check=False)
print("runs:", list(record["runs"]), "probes:", list(record["probes"]))
PY
}
export PYTHONPATH="$root/src:$root" PYTHONUNBUFFERED=1
for dir in "$configs"/*/; do
  case=$(basename "$dir")
  world=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['world_size'])" \
    "$dir/fsdp2_h100.json")
  [ "$world" = "$gpus" ] || continue
  flags="--steps $steps --out $runs/$case.json"
  if [ "$device" = cpu ]; then flags="$flags --device cpu"; else flags="$flags --profile"; fi
  echo "== $case $(date -u +%T)"
  (cd "$dir" && timeout "${CASE_TIMEOUT:-150}" bash launch_h100.sh $flags) > "$runs/$case.log" 2>&1 \
    || echo "$case failed: $(tail -3 "$runs/$case.log")"
  merge  # NB: after each case, so that a call stopped at its limit keeps what ran
done
if [ "$device" != cpu ]; then
  echo "== nccl probe $(date -u +%T)"
  timeout 90 torchrun --standalone --nproc-per-node="$gpus" -m benchmarks.sharded.nccl_probe \
    --out "$runs/probe-nccl-g$gpus.json" > "$runs/probe-nccl-g$gpus.log" 2>&1 \
    || echo "probe failed: $(tail -3 "$runs/probe-nccl-g$gpus.log")"
  nvidia-smi topo -m > "$runs/topology.txt" 2>&1
  merge
fi
