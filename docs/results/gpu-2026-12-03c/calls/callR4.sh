#!/usr/bin/env bash
# 2026-12-03 (third session) call R4, main with the mmq K split capped at 32 instead of 16 (k / v projections:
# 4 row blocks x 32 = 128 CTAs instead of 64): (1) the mmq and graph-rows GPU tests; (2) 64 agents on one shared
# 32k context, llama-3.1-8b q4_0, q8_0/turbo3t, cap 32 (default) vs POLYKV_CUDA_MMQ_MAX_SPLITS=16, interleaved, 2 rounds.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 4 120 'MmqCuda.*:CudaGraphRows.*:MatvecSplitCuda.*:-*DISABLED*'
wait
note "synth and tests done at $((SECONDS-t0)) s"
for round in 1 2; do
  for v in cap32 cap16; do
    e=POLYKV_NONE=1; [ $v = cap16 ] && e=POLYKV_CUDA_MMQ_MAX_SPLITS=16
    env $e timeout 150 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 -r 2 --json \
      2>> $OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$round,/" >> $OUT/agents.jsonl
    note "$v round $round ($((SECONDS-t0)) s): $(grep "\"variant\":\"$v\",\"round\":$round" $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"decode_only_step_s":[0-9.]+' | paste -sd' ')"
  done
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf r4.tar.xz shard*.log bench.err && rm -f shard*.log
