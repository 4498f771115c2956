#!/usr/bin/env bash
# (GPU; OUT=DIR) fp16 against bf16 autocast on the H100 for two BatchNorm networks: trainfit measure, 2 rounds alternating
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
for round in 1 2; do
  for p in fp16 bf16; do
    for m in redimnet vq; do
      if [ $m = redimnet ]; then args="trainfit.models.zoo:redimnet_like --batch 32"; else args="trainfit.models.zoo:vq_patch_autoencoder --batch 16 --multiplier 16"; fi
      out=$(PYTHONPATH=src timeout 100 python -m trainfit measure $args --precision $p --on cuda --device h100 --steps 20 --json 2>>$OUT/log.txt)
      python -c "import json,sys; print(json.dumps({'model': '$m', 'precision': '$p', 'round': $round, 'result': json.loads(sys.argv[1]) if sys.argv[1] else None}))" "$out" >> $OUT/results.jsonl
    done
  done
done
wc -l $OUT/results.jsonl; tail -3 $OUT/log.txt
