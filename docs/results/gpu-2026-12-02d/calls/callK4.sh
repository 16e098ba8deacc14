#!/usr/bin/env bash
# 2026-12-02 (fourth session) call K4: the scaled 256-row prefix kernel on 16 warps (POLYKV_CUDA_PREFIX256_WARPS=16)
# against 8; the argmax check fixed. (1) CudaAttentionPrefix.DISABLED_PrefixPassBench (every variant interleaved,
# 3 rounds); (2) the prefix, model-argmax and engine GPU tests; (3) bench-agents 1,16,64 on one shared 32k context,
# 8 and 16 warps interleaved (2 rounds).
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
timeout 150 $T --gtest_also_run_disabled_tests --gtest_filter='CudaAttentionPrefix.DISABLED_PrefixPassBench' > $OUT/prefix-bench.log 2>&1
note "prefix bench ($((SECONDS-t0)) s):"; grep -E '^(K/V|q8|f16|turbo)' $OUT/prefix-bench.log | tee -a $SUMMARY
gtest_shards 4 170 '*CudaAttentionPrefix*:*ModelCudaArgmax*:*EngineCuda*:*OpsCuda*:-*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
for round in 1 2; do
  for warps in 8 16; do
    POLYKV_CUDA_PREFIX256_WARPS=$warps timeout 100 $P bench-agents -m $M --device cuda --agents 1,16,64 --share on \
      --context 32768 --suffix 32 --gen 32 --json 2>> $OUT/agents.err | grep '^{' | sed "s/^{/{\"prefix256_warps\":$warps,\"round\":$round,/" >> $OUT/agents.jsonl
    note "agents warps $warps r$round ($((SECONDS-t0)) s): $(tail -3 $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' | paste -sd' ')"
  done
done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f shard*.log *.err
