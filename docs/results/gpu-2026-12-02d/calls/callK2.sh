#!/usr/bin/env bash
# 2026-12-02 (fourth session) call K2: the 256-row prefix kernel with scaled products (two MMAs per fragment pair
# instead of three; POLYKV_CUDA_PREFIX256=split is the previous kernel). (1) CudaAttentionPrefix.DISABLED_PrefixPassBench
# (every prefix kernel, interleaved, 3 rounds); (2) the attention, KV and engine GPU tests (no emulation tests);
# (3) bench-agents on one shared 32k context, scaled and split interleaved (2 rounds).
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
timeout 150 $T --gtest_also_run_disabled_tests --gtest_filter='CudaAttentionPrefix.DISABLED_PrefixPassBench' > $OUT/prefix-bench.log 2>&1
note "prefix bench ($((SECONDS-t0)) s):"; grep -E '^(K/V|q8|f16|turbo)' $OUT/prefix-bench.log | tee -a $SUMMARY
gtest_shards 8 200 '*CudaAttention*:*CudaKv*:*EngineCuda*:*CudaGraph*:*ModelCuda*:-*Emulation*:*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
for round in 1 2; do
  for mode in scaled split; do
    if [ $mode = split ]; then export POLYKV_CUDA_PREFIX256=split; A=64; else unset POLYKV_CUDA_PREFIX256; A=1,16,64; fi
    timeout 100 $P bench-agents -m $M --device cuda --agents $A --share on --context 32768 --suffix 32 --gen 32 --json \
      2>> $OUT/agents.err | grep '^{' | sed "s/^{/{\"prefix256\":\"$mode\",\"round\":$round,/" >> $OUT/agents.jsonl
    note "agents $mode r$round ($((SECONDS-t0)) s): $(tail -3 $OUT/agents.jsonl | grep "\"round\":$round" | grep "\"$mode\"" | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' | paste -sd' ')"
  done
done
unset POLYKV_CUDA_PREFIX256
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f shard*.log *.err
