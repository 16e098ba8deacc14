#!/usr/bin/env bash
# 2026-12-02 (seventh session) call N3, final main (the merge's prefetch removed after N2): the attention, model and
# invariance GPU tests (4 shards, while the model is made); decode at 32768 (q8_0/turbo3t, q8_0/q8_0) and at 131072
# (q8_0/turbo3t, q8_0/q8_0, f16/f16: the 1.5x-f16 and never-slower targets), one fill each, 2 reps.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
gtest_shards 4 100 'CudaAttention*:*ModelCuda*:GenerateCuda.*:SpecInvarianceCuda.*:*Sinks*Cuda*:-*Emulation*:*DISABLED*:*Speed*:*Bench*'
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
run() {  # file depth reps timeout k v
  timeout $4 $P bench -m $M $B -p 0 -n 32 -d $2 -r $3 -ctk $5 -ctv $6 2>>$OUT/bench.err | grep '^{' >> $OUT/$1
  note "$1 $5/$6 ($((SECONDS-t0)) s): $(tail -1 $OUT/$1 | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
}
run d32768.jsonl 32768 2 60 q8_0 turbo3t
run d32768.jsonl 32768 2 60 q8_0 q8_0
run d131072.jsonl 131072 2 170 q8_0 turbo3t
run d131072.jsonl 131072 2 170 q8_0 q8_0
run d131072.jsonl 131072 2 170 f16 f16
note "done at $((SECONDS-t0)) s"
grep -v '^KV cache' $OUT/bench.err | tail -8 >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz shard*.log bench.err && rm -f shard*.log bench.err
