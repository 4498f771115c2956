#!/bin/bash
# trainfit measure's loop window after the filling step and device events: two runs of three of
# measure_loop_h100's cases, JSON under $OUT
export PYTHONPATH=src:.
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/gpu.txt
python -c "import torch,transformers,sys;print(torch.__version__,torch.version.cuda,transformers.__version__,sys.version)" >> $OUT/gpu.txt
run() { name=$1; shift; for r in 1 2; do timeout 100 python -m trainfit measure "$@" --json > $OUT/$name-$r.json 2> $OUT/$name-$r.err; echo "$name $r rc=$?" >> $OUT/rc.txt; done; }
run gpt2-bf16-b8-s512 gpt2 --batch 8 --seq 512 --precision bf16 --steps 30
run mlp-12x128-b16-sgdm benchmarks.steptime.models:mlp_12x128 --input x=B,32 --batch 16 --optimizer sgd-momentum --steps 200
run resnet18-bf16-b64-160 benchmarks.steptime.models:resnet18 --input x=B,3,160,160 --batch 64 --precision bf16 --steps 30
cd $OUT && tar czf /tmp/all.tgz * && rm -f * && mv /tmp/all.tgz $OUT/all.tgz && ls $OUT
