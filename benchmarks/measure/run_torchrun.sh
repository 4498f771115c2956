#!/bin/sh
# `trainfit measure --max-batch` under torchrun on two GPUs (the device tool runs this from the
# repo root; results under $OUT/torchrun). First both GPUs free, then GPU 1 with 30 GiB held by
# another process: every rank must report the same answer, the smaller card's.
export PYTHONPATH=src:.
mkdir -p "$OUT/torchrun"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader > "$OUT/torchrun/nvidia-smi.txt"
python -c "import torch, transformers, json; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'nccl': '.'.join(map(str, torch.cuda.nccl.version())), 'transformers': transformers.__version__}))" > "$OUT/torchrun/versions.json"
run() {
    name=$1; shift
    timeout 240 torchrun --nproc-per-node 2 -m trainfit measure gpt2 --seq 1024 --precision bf16 \
        --max-batch --effective-batch 256 --json "$@" > "$OUT/torchrun/$name.json" 2> "$OUT/torchrun/$name.stderr"
    echo "$name: exit $?"
}
run free
python -c "import torch, time; x = torch.empty(30 << 30, dtype=torch.uint8, device='cuda:1'); print('held', flush=True); time.sleep(400)" > /tmp/holder.txt 2>&1 &
HOLDER=$!
sleep 20
cat /tmp/holder.txt
run gpu1-busy
kill $HOLDER
