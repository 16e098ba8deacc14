#!/usr/bin/env bash
# 2026-12-01g calls G2c/G2d (warm machine after G2b, run inline; recorded here as run): the verify-step cost curve
# on CUDA, synth llama-3.1-8b, default kernels vs --batch-invariant, depths 0 and 4096 (q4_K's synth timed out at
# 30 s: no q4_K rows).
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries; P=build-gpu/polykv; t0=$SECONDS
timeout 70 $P synth --shape llama-3.1-8b --type q4_0 -o /tmp/l8-q4_0.gguf --threads 16 >/dev/null 2>&1
for inv in --no-batch-invariant --batch-invariant; do
  timeout 30 $P bench -m /tmp/l8-q4_0.gguf --device cuda $inv --verify-k 1,2,3,4,8 -d 0 -r 3 --verify-steps 8 --json 2>>$OUT/verify.err | grep '^{' | sed "s/^{/{\"switch\":\"$inv\",/" >> $OUT/verify.jsonl
done
for t in q8_0 q4_K; do timeout 30 $P synth --shape llama-3.1-8b --type $t -o /tmp/l8-$t.gguf --threads 16 >/dev/null 2>&1; done
for d in 0 4096; do for t in q4_0 q8_0 q4_K; do [ $d = 0 ] && [ $t = q4_0 ] && continue; for inv in --no-batch-invariant --batch-invariant; do
  timeout 20 $P bench -m /tmp/l8-$t.gguf --device cuda $inv --verify-k 1,2,3,4,8 -d $d -r 3 --verify-steps 8 --json 2>>$OUT/verify.err | grep '^{' | sed "s/^{/{\"switch\":\"$inv\",\"type\":\"$t\",/" >> $OUT/verify.jsonl
done; done; done
