#!/usr/bin/env bash
# 2026-12-05b call Z1: every CUDA GPU test at main 2da0849+ (the ternary model test's final form, TernaryCuda.ModelLogitsMatchTheCpu
# through tests/cuda/cuda_test_util.h, had compiled but never run), then decode at depth 0 on synth llama-3.1-8b q4_0 for
# three KV pairs, interleaved, 2 rounds (a regression check against call Y2 of docs/results/gpu-2026-12-05).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 8 220 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*:SpecCuda.GreedyIdentityNgramDraftMtp'
note "tests done at $((SECONDS-t0)) s"
timeout 240 $P synth --shape llama-3.1-8b --type q4_0 -o /tmp/l8-q4_0.gguf --threads 16 >>$OUT/synth.log 2>&1 || note "synth failed"
for r in 1 2; do
  for kv in "f16 f16" "q8_0 q8_0" "q8_0 turbo3t"; do
    set -- $kv
    timeout 120 $P bench -m /tmp/l8-q4_0.gguf --device cuda -ctk $1 -ctv $2 -d 0 -p 0 -n 128 -r 3 --bandwidth 4240 --json \
      2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"round\":$r,/" >>$OUT/d0.jsonl
    note "d0 $1/$2 r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/d0.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
  done
done
cd $OUT && tar cJf z1-logs.tar.xz shard*.log synth.log bench.err 2>/dev/null && rm -f shard*.log
note "done at $((SECONDS-t0)) s"
