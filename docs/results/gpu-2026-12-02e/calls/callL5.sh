#!/usr/bin/env bash
# 2026-12-02 (fifth session) call L5, final main: (1) every CUDA GPU test but the emulation (8 shards); (2) decode at
# depth 0 for three KV pairs (-r 3); (3) bench-agents 1,64 on one shared 32k context (the 64-agent step uses the merge
# and the norms changed this session). Few output files (the tool returns a limited count).
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
gtest_shards 8 170 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
for kv in "f16 f16" "q8_0 q8_0" "q8_0 turbo3t"; do
  set -- $kv
  timeout 60 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err | grep '^{' >> $OUT/final.jsonl
  note "d0 $1/$2 ($((SECONDS-t0)) s): $(tail -1 $OUT/final.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
done
timeout 100 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 --json \
  2>> $OUT/bench.err | grep '^{' >> $OUT/final.jsonl
note "agents ($((SECONDS-t0)) s): $(grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' $OUT/final.jsonl | tail -4 | paste -sd' ')"
note "done at $((SECONDS-t0)) s"
tail -3 $OUT/bench.err >> $SUMMARY
cd $OUT && tar cJf test-logs.tar.xz shard*.log && rm -f shard*.log bench.err
