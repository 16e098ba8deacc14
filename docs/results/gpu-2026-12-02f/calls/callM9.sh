#!/usr/bin/env bash
# 2026-12-02 (sixth session) call M9: the decode-row store alone on its multiprocessors (the default now) against
# sharing them with the early-started attention (POLYKV_CUDA_KV_STORE_ALONE=0): store and model tests, timelines at
# 32768, decode at 32768 (q8_0/turbo3t, q8_0/q8_0) and depth 0 (q8_0/turbo3t), interleaved.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
timeout 100 $T --gtest_filter='*KvStore*:FuseDecCuda.*:*ModelCuda*:GenerateCuda.*:-*Speed*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.log | paste -sd' ')"
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/t.csv timeout 60 $P bench -m $M $B -p 0 -n 32 -d 32768 -r 1 -ctk q8_0 -ctv turbo3t >/dev/null 2>&1
python3 scripts/cuda_trace_summary.py $OUT/t.csv --skip 4 > $OUT/trace-d32768-q8_0-turbo3t-alone.summary.txt 2>&1; rm -f $OUT/t.csv
note "trace alone: $(grep -E '^period' $OUT/trace-d32768-q8_0-turbo3t-alone.summary.txt | cut -c1-70)"
grep -E '^(kv_store|device::|matvec_split_kernel)' $OUT/trace-d32768-q8_0-turbo3t-alone.summary.txt >> $SUMMARY
for V in turbo3t q8_0; do
  for a in 1 0; do
    POLYKV_CUDA_KV_STORE_ALONE=$a timeout 60 $P bench -m $M $B -p 0 -n 32 -d 32768 -r 2 -ctk q8_0 -ctv $V 2>>$OUT/bench.err |
      grep '^{' | sed "s/^{/{\"alone\":$a,/" >> $OUT/d32768-alone.jsonl
    note "d32768 q8_0/$V alone=$a ($((SECONDS-t0)) s): $(tail -1 $OUT/d32768-alone.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
  done
done
for a in 1 0 1 0; do
  POLYKV_CUDA_KV_STORE_ALONE=$a timeout 60 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"alone\":$a,/" >> $OUT/d0-alone.jsonl
  note "d0 q8_0/turbo3t alone=$a ($((SECONDS-t0)) s): $(tail -1 $OUT/d0-alone.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf logs.tar.xz tests.log bench.err && rm -f tests.log bench.err
