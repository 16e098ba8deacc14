#!/usr/bin/env bash
# 2026-12-02 (fifth session) call L6, main with pipelined greedy steps: (1) the GPU tests of the paths it touches
# (generate pipelined / one step / host argmax, model logits against the CPU, graphs, engine, speculative identity
# and invariance, argmax); (2) decode at depth 0, pipelined (default) against POLYKV_GREEDY_PIPELINE=0, interleaved,
# 2 rounds x 3 reps, f16/f16 and q8_0/turbo3t; (3) the same at 32768, q8_0/turbo3t, one round x 2 reps.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 4 100 'GenerateCuda.*:*ModelCuda*:EngineCuda*:SpecCuda.Greedy*:*SpecInvarianceCuda*:CudaBackend*:OpsActsCuda.*:-*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    for v in 1 0; do
      POLYKV_GREEDY_PIPELINE=$v timeout 60 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err |
        grep '^{' | sed "s/^{/{\"round\":$round,\"pipeline\":$v,/" >> $OUT/pipeline.jsonl
      note "r$round d0 $1/$2 pipeline=$v ($((SECONDS-t0)) s): $(tail -1 $OUT/pipeline.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
for v in 1 0; do
  POLYKV_GREEDY_PIPELINE=$v timeout 60 $P bench -m $M $B -p 0 -n 32 -d 32768 -r 2 -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"round\":1,\"pipeline\":$v,/" >> $OUT/pipeline.jsonl
  note "d32768 q8_0/turbo3t pipeline=$v ($((SECONDS-t0)) s): $(tail -1 $OUT/pipeline.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
done
note "done at $((SECONDS-t0)) s"
tail -3 $OUT/bench.err >> $SUMMARY
cd $OUT && tar cJf test-logs.tar.xz shard*.log && rm -f shard*.log bench.err
