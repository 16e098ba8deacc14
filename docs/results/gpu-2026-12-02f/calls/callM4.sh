#!/usr/bin/env bash
# 2026-12-02 (sixth session) call M4: the warp forms with compile-time group and subset sizes (the default, radix-4
# Viterbi) against main's array forms (POLYKV_CUDA_KV_VITERBI=array) and the one-step Viterbi (=radix2), for turbo3t
# and turbo3 V: store tests, in-graph timelines at depth 0, decode at depth 0 interleaved (2 rounds x 3 reps).
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
for v in default radix2 array; do
  POLYKV_CUDA_KV_VITERBI=$v timeout 120 $T --gtest_filter='*KvStore*:-*Speed*' --gtest_color=no > $OUT/store-$v.log 2>&1
  note "store tests $v rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/store-$v.log | paste -sd' ')"
done
timeout 150 $T --gtest_filter='FuseDecCuda.*:*ModelCuda*:GenerateCuda.*:EngineCuda*' --gtest_color=no > $OUT/model.log 2>&1
note "model tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/model.log | paste -sd' ')"
for v in default array; do
  POLYKV_CUDA_KV_VITERBI=$v timeout 120 $T --gtest_filter='CudaKvStore.PrefillSpeed' > $OUT/prefill-$v.log 2>&1
  note "prefill store $v:"; grep -A14 'GPU ns/row' $OUT/prefill-$v.log >> $SUMMARY
done
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
for V in turbo3t turbo3; do
  for v in default array radix2; do
    [ $V = turbo3 ] && [ $v = radix2 ] && continue
    POLYKV_CUDA_KV_VITERBI=$v CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d0-$V-$v.csv timeout 120 $P bench -m $M $B -p 512 -n 64 \
      -r 1 -ctk q8_0 -ctv $V >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
    python3 scripts/cuda_trace_summary.py $OUT/trace-d0-$V-$v.csv --skip 4 > $OUT/trace-d0-$V-$v.summary.txt 2>&1
    note "trace d0 $V $v: $(grep -E '^period' $OUT/trace-d0-$V-$v.summary.txt | cut -c1-60) | $(grep -E '^kv_store' $OUT/trace-d0-$V-$v.summary.txt)"
  done
done
for round in 1 2; do
  for kvv in "q8_0 turbo3t default" "q8_0 turbo3t array" "q8_0 turbo3t radix2" "q8_0 turbo3 default" "q8_0 turbo3 array" "q8_0 q8_0 default" "turbo3t turbo3t default" "turbo3t turbo3t array"; do
    set -- $kvv
    POLYKV_CUDA_KV_VITERBI=$3 timeout 60 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err |
      grep '^{' | sed "s/^{/{\"round\":$round,\"encoder\":\"$3\",/" >> $OUT/d0-forms.jsonl
    note "r$round d0 $1/$2 $3 ($((SECONDS-t0)) s): $(tail -1 $OUT/d0-forms.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
  done
done
note "done at $((SECONDS-t0)) s"
tail -2 $OUT/bench.err >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz store-*.log model.log prefill-*.log trace.err bench.err trace-bench.jsonl && rm -f store-*.log model.log prefill-*.log trace.err bench.err trace-bench.jsonl
tar cf traces.tar trace-d0-*.summary.txt && rm -f trace-d0-*.csv trace-d0-*.summary.txt
