#!/usr/bin/env bash
# 2026-12-02 (seventh session) call N4, final main: the shared-prefix attention tests that N3's shards did not reach
# (the merge's prefix path moved before the wait), then many agents on one shared 32k context, 3 repetitions.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 3 95 'CudaAttentionPrefix.*:CudaAttentionSinks.*:CudaAttention.SharedPrefix*:*EngineCuda*:-*DISABLED*:*Speed*:*Bench*'
wait
note "synth done at $((SECONDS-t0)) s"
timeout 150 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 -r 3 --json \
  2>> $OUT/bench.err | grep '^{' >> $OUT/agents.jsonl
note "agents ($((SECONDS-t0)) s): $(grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' $OUT/agents.jsonl | paste -sd' ')"
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf logs.tar.xz shard*.log bench.err && rm -f shard*.log bench.err
