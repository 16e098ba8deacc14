#!/usr/bin/env bash
# 2026-12-04c call U1: every CUDA GPU test on this stop's code (hybrid prefix caching through state
# checkpoints in device memory, SequenceMark), then on a synth Qwen3.5-9B (q4_0, all 32 layers, made here):
# bench-agents --share all (named pool / private copies / automatic prefix caching), 8 agents staggered on a
# 16384-token document with 100-token questions, 2 repetitions; bench --depth 16384 (now possible on hybrids).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 8 200 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*:SpecCuda.GreedyIdentityNgramDraftMtp'
note "tests done at $((SECONDS-t0)) s"
M=/tmp/q35-9b-q4_0.gguf
timeout 200 $P synth --shape qwen3.5-9b --type q4_0 -o $M > $OUT/synth.log 2>&1; note "synth rc=$? at $((SECONDS-t0)) s"
timeout 300 $P bench-agents -m $M --device cuda --agents 8 --context 16384 --suffix 100 --gen 32 --share all \
  --arrival staggered -r 2 --json 2>>$OUT/agents.err | grep '^{' > $OUT/agents.jsonl
note "agents rc=$? lines $(wc -l < $OUT/agents.jsonl) at $((SECONDS-t0)) s"
for kv in "f16 f16" "q8_0 turbo3t"; do
  set -- $kv
  timeout 120 $P bench -m $M --device cuda -d 16384 -p 512 -n 64 -r 3 -ctk $1 -ctv $2 --json 2>>$OUT/bench.err \
    | grep '^{' >> $OUT/depth.jsonl
  note "depth 16384 $1/$2: $(tail -1 $OUT/depth.jsonl | grep -oE '"(prefill_tok_s|decode_tok_s|floor_tok_s)":[0-9.]+' | paste -sd' ')"
done
cd $OUT && tar cJf u1.tar.xz shard*.log *.err synth.log && rm -f shard*.log
