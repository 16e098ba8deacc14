#!/usr/bin/env bash
# 2026-12-02 (sixth session) call M7: the radix-4 Viterbi with the surviving cost as a min (the default now) against
# the select (POLYKV_CUDA_KV_VITERBI=radix4sel): store tests with both, model tests, in-graph timelines at depth 0,
# decode at depth 0 interleaved (2 rounds x 3 reps), q8_0/turbo3t.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
for v in default radix4sel; do
  POLYKV_CUDA_KV_VITERBI=$v timeout 120 $T --gtest_filter='*KvStore*:-*Speed*' --gtest_color=no > $OUT/store-$v.log 2>&1
  note "store tests $v rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/store-$v.log | paste -sd' ')"
done
timeout 150 $T --gtest_filter='FuseDecCuda.*:*ModelCuda*:GenerateCuda.*:EngineCuda*:*SpecInvarianceCuda*' --gtest_color=no > $OUT/model.log 2>&1
note "model tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/model.log | paste -sd' ')"
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
for v in default radix4sel; do
  POLYKV_CUDA_KV_VITERBI=$v CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d0-$v.csv timeout 120 $P bench -m $M $B -p 512 -n 64 -r 1 \
    -ctk q8_0 -ctv turbo3t >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
  python3 scripts/cuda_trace_summary.py $OUT/trace-d0-$v.csv --skip 4 > $OUT/trace-d0-$v.summary.txt 2>&1
  note "trace d0 $v: $(grep -E '^period' $OUT/trace-d0-$v.summary.txt | cut -c1-60) | $(grep -E '^kv_store' $OUT/trace-d0-$v.summary.txt)"
done
for round in 1 2; do
  for v in default radix4sel; do
    POLYKV_CUDA_KV_VITERBI=$v timeout 60 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err |
      grep '^{' | sed "s/^{/{\"round\":$round,\"encoder\":\"$v\",/" >> $OUT/d0-min.jsonl
    note "r$round d0 q8_0/turbo3t $v ($((SECONDS-t0)) s): $(tail -1 $OUT/d0-min.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
  done
done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf logs.tar.xz store-*.log model.log trace.err bench.err trace-bench.jsonl && rm -f store-*.log model.log trace.err bench.err trace-bench.jsonl trace-d0-*.csv
