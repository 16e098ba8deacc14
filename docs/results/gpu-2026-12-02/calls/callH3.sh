#!/usr/bin/env bash
# 2026-12-02 call H3 (main + the small-step decode plan: sequences of <= 8 query rows on the decode kernel in
# query tiles, POLYKV_CUDA_ATTN_SMALL_Q=0 for the old plan): (1) every CUDA GPU test in 6 shards; (2) the verify-step
# cost curve on CUDA without --batch-invariant, old plan vs new, synth llama-3.1-8b q4_0 and q8_0, depths 0 and 4096,
# 2 interleaved rounds; --batch-invariant once per cell as the reference.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "commit $(git rev-parse --short HEAD 2>/dev/null) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
T=build-gpu/polykv_tests; P=build-gpu/polykv
( for t in q4_0 q8_0; do $P synth --shape llama-3.1-8b --type $t -o /tmp/l8-$t.gguf --threads 8 > /dev/null 2>&1; done ) &
SYN=$!
t0=$SECONDS
F='*Cuda*:CublasLoader.*:-CudaAttentionSinks.SharedPrefix:*DISABLED*'
for i in 0 1 2 3 4 5; do
  ( GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i timeout 300 $T --gtest_filter="$F" --gtest_color=no > $OUT/shard$i.log 2>&1; rc=$?
    { echo "---- shard $i rc=$rc ($((SECONDS-t0)) s)"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/shard$i.log | sed 's/^/   /'; } >> $SUMMARY ) &
done
wait
note "==== tests done at $((SECONDS-t0)) s; failed: $(grep -h '^\[  FAILED  \] [A-Za-z]' $OUT/shard*.log | sort -u | paste -sd' ')"
for r in 1 2; do for d in 0 4096; do for t in q4_0 q8_0; do for plan in old new inv; do
  case $plan in old) envs=(env POLYKV_CUDA_ATTN_SMALL_Q=0); sw=--no-batch-invariant;; new) envs=(env); sw=--no-batch-invariant;; inv) envs=(env); sw=--batch-invariant;; esac
  [ $plan = inv ] && [ $r = 2 ] && continue
  timeout 25 "${envs[@]}" $P bench -m /tmp/l8-$t.gguf --device cuda $sw --verify-k 1,2,3,4,8 -d $d -r 3 --verify-steps 8 --json 2>>$OUT/verify.err | grep '^{' | sed "s/^{/{\"round\":$r,\"plan\":\"$plan\",\"type\":\"$t\",/" >> $OUT/verify.jsonl
  note "r$r d$d $t $plan: $(tail -1 $OUT/verify.jsonl | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(" ".join("k%d:%.2f(%.2fms)" % (v["k"], v["ratio"], v["step_ms"]) for v in r["verify"]))' 2>/dev/null) ($((SECONDS-t0)) s)"
done; done; done; done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f *.log *.err
