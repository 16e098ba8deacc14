#!/usr/bin/env bash
# 2026-12-04c call U2: every CUDA GPU test on this stop's code (prefix-aware admission, decode-step state
# checkpoints), then on the H200: agents arriving together on one document with no named pool
# (bench-agents --share prefix --arrival together), the engine's wait for a running prefix on and off,
# interleaved, 2 rounds: synth llama-3.1-8b q4_0 (16 agents, 16384-token document) and synth Qwen3.5-9B q4_0
# (8 agents, 16384 tokens, 100-token questions); then bench --depth on the hybrid (d 0 / 32768, f16 and q8_0/turbo3t).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 8 200 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*:SpecCuda.GreedyIdentityNgramDraftMtp'
note "tests done at $((SECONDS-t0)) s"
L=/tmp/l8b-q4_0.gguf Q=/tmp/q35-9b-q4_0.gguf
timeout 150 $P synth --shape llama-3.1-8b --type q4_0 -o $L > $OUT/synth.log 2>&1 &
timeout 150 $P synth --shape qwen3.5-9b --type q4_0 -o $Q >> $OUT/synth.log 2>&1
wait; note "synth at $((SECONDS-t0)) s"
for r in 0 1; do
  for w in on off; do
    timeout 150 $P bench-agents -m $L --device cuda --agents 16 --context 16384 --suffix 32 --gen 32 --share prefix \
      --arrival together --prefix-wait $w --json 2>>$OUT/agents.err | grep '^{' | sed "s/^{/{\"round\":$r,/" >> $OUT/wait_l8b.jsonl
    timeout 150 $P bench-agents -m $Q --device cuda --agents 8 --context 16384 --suffix 100 --gen 32 --share prefix \
      --arrival together --prefix-wait $w --json 2>>$OUT/agents.err | grep '^{' | sed "s/^{/{\"round\":$r,/" >> $OUT/wait_q35.jsonl
    note "round $r wait $w at $((SECONDS-t0)) s"
  done
done
for kv in "f16 f16" "q8_0 turbo3t"; do
  set -- $kv
  for d in 0 32768; do
    timeout 60 $P bench -m $Q --device cuda -d $d -p 512 -n 128 -r 3 -ctk $1 -ctv $2 --bandwidth 4240 --json \
      2>>$OUT/bench.err | grep '^{' >> $OUT/depth.jsonl
    note "q35 d$d $1/$2: $(tail -1 $OUT/depth.jsonl | grep -oE '"(prefill_tok_s|decode_tok_s|floor_tok_s)":[0-9.]+' | paste -sd' ')"
  done
done
cd $OUT && tar cJf u2.tar.xz shard*.log *.err synth.log && rm -f shard*.log
