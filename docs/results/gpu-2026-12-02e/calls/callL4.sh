#!/usr/bin/env bash
# 2026-12-02 (fifth session) call L4, main with the grouped merge: (1) the attention and model CUDA tests; (2) decode at
# depth 32768 with the grouped merge (default) against POLYKV_CUDA_MERGE=serial, interleaved, 2 rounds x 2 reps, three
# KV pairs; (3) depth 131072, q8_0/turbo3t and f16/f16, grouped then serial, one fill each; (4) a timeline at 32768.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 6 150 '*Attention*Cuda*:*CudaAttention*:*ModelCuda*:*SpecInvarianceCuda*:OpsActsCuda.*:-*Emulation*:*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for kv in "q8_0 turbo3t" "q8_0 q8_0" "f16 f16"; do
    set -- $kv
    for v in grouped serial; do
      POLYKV_CUDA_MERGE=$v timeout 100 $P bench -m $M $B -p 0 -n 32 -d 32768 -r 2 -ctk $1 -ctv $2 2>>$OUT/bench.err |
        grep '^{' | sed "s/^{/{\"round\":$round,\"merge\":\"$v\",/" >> $OUT/d32768-merge.jsonl
      note "r$round d32768 $1/$2 $v ($((SECONDS-t0)) s): $(tail -1 $OUT/d32768-merge.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d32768-q8_0-turbo3t-grouped.csv timeout 120 $P bench -m $M $B -p 0 -n 32 -d 32768 \
  -r 1 -ctk q8_0 -ctv turbo3t >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
note "trace d32768 grouped ($((SECONDS-t0)) s): $(tail -1 $OUT/trace-bench.jsonl | grep -oE '"decode_tok_s":[0-9.]+')"
for kv in "q8_0 turbo3t" "f16 f16"; do
  set -- $kv
  for v in grouped serial; do
    POLYKV_CUDA_MERGE=$v timeout 150 $P bench -m $M $B -p 0 -n 32 -d 131072 -r 2 -ctk $1 -ctv $2 2>>$OUT/bench.err |
      grep '^{' | sed "s/^{/{\"merge\":\"$v\",/" >> $OUT/d131072-merge.jsonl
    note "d131072 $1/$2 $v ($((SECONDS-t0)) s): $(tail -1 $OUT/d131072-merge.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
  done
done
note "done at $((SECONDS-t0)) s"
tail -3 $OUT/bench.err >> $SUMMARY
cd $OUT && xz -9 *.csv; tar cJf test-logs.tar.xz shard*.log; rm -f shard*.log
