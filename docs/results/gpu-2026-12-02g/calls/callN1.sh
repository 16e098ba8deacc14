#!/usr/bin/env bash
# 2026-12-02 (seventh session) call N1. A/B in one binary, interleaved:
#   merge: indices before the PDL wait + O rows prefetched into L1 (default) vs POLYKV_CUDA_MERGE_PREFETCH=0, and the
#          merge inside the decode kernel's last block (POLYKV_CUDA_MERGE_FUSED=1);
#   attention early start (default) vs POLYKV_CUDA_ATTN_EARLY=0 ("late");
#   store: its table lines read before the wait (default) vs POLYKV_CUDA_KV_STORE_TOUCH=0; radix-4 vs =radix2.
# Tests of attention, store, model (default, and with the fused merge); timelines at 32768; the merge in ncu.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
F='CudaAttention*:*KvStore*:*ModelCuda*:GenerateCuda.*:SpecInvarianceCuda.*:*Sinks*Cuda*:-*Speed*:*Bench*:*DISABLED*'
timeout 170 $T --gtest_filter="$F" --gtest_color=no > $OUT/tests.log 2>&1 &
POLYKV_CUDA_MERGE_FUSED=1 timeout 170 $T --gtest_filter='CudaAttention*:*ModelCuda*:GenerateCuda.*:*Sinks*Cuda*:-*Speed*:*Bench*:*DISABLED*' \
  --gtest_color=no > $OUT/tests-fused.log 2>&1 &
wait
note "tests rc: $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.log | paste -sd' ')"
note "tests fused: $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-fused.log | paste -sd' ')"
grep -hE '^\[  FAILED  \]' $OUT/tests.log $OUT/tests-fused.log | head >> $SUMMARY
note "synth + tests done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
trace() {  # name env...
  local name=$1; shift
  env "$@" CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/t.csv timeout 40 $P bench -m $M $B -p 0 -n 32 -d 32768 -r 1 $KV >/dev/null 2>&1
  python3 scripts/cuda_trace_summary.py $OUT/t.csv --skip 4 > $OUT/trace-d32768-$name.summary.txt 2>&1
  [ $name = q8_0-turbo3t-default ] && NMERGE=$(grep -c merge_kernel $OUT/t.csv)
  rm -f $OUT/t.csv
  note "trace $name: $(grep -E '^period' $OUT/trace-d32768-$name.summary.txt | cut -c1-60)"
  grep -E '^(kv_store|device::)' $OUT/trace-d32768-$name.summary.txt >> $SUMMARY
}
KV="-ctk q8_0 -ctv turbo3t"
trace q8_0-turbo3t-default
trace q8_0-turbo3t-nopf POLYKV_CUDA_MERGE_PREFETCH=0
trace q8_0-turbo3t-fused POLYKV_CUDA_MERGE_FUSED=1
trace q8_0-turbo3t-late POLYKV_CUDA_ATTN_EARLY=0
KV="-ctk q8_0 -ctv q8_0"
trace q8_0-q8_0-default
trace q8_0-q8_0-fused POLYKV_CUDA_MERGE_FUSED=1
run() {  # file depth reps label env...
  local f=$1 d=$2 r=$3 label=$4; shift 4
  env "$@" timeout 60 $P bench -m $M $B -p 0 -n 32 -d $d -r $r $KV 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"variant\":\"$label\",/" >> $OUT/$f
  note "$f $KV $label ($((SECONDS-t0)) s): $(tail -1 $OUT/$f | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
}
for round in 1 2; do
  for V in turbo3t q8_0; do
    KV="-ctk q8_0 -ctv $V"
    run d32768.jsonl 32768 2 default
    run d32768.jsonl 32768 2 nopf POLYKV_CUDA_MERGE_PREFETCH=0
    run d32768.jsonl 32768 2 fused POLYKV_CUDA_MERGE_FUSED=1
    run d32768.jsonl 32768 2 late POLYKV_CUDA_ATTN_EARLY=0
  done
done
KV="-ctk q8_0 -ctv turbo3t"
run d131072.jsonl 131072 1 default
run d131072.jsonl 131072 1 fused POLYKV_CUDA_MERGE_FUSED=1
run d131072.jsonl 131072 1 late POLYKV_CUDA_ATTN_EARLY=0
for round in 1 2; do
  for v in default notouch radix2; do
    e=; [ $v = notouch ] && e=POLYKV_CUDA_KV_STORE_TOUCH=0; [ $v = radix2 ] && e=POLYKV_CUDA_KV_VITERBI=radix2
    env $e timeout 40 $P bench -m $M $B -p 512 -n 128 -r 3 $KV 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",/" >> $OUT/d0.jsonl
    note "d0 $KV $v ($((SECONDS-t0)) s): $(tail -1 $OUT/d0.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
  done
done
# The merge alone (Nsight Compute serializes kernels): its duration against its exposed time in the timelines.
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 90 $NCU --section SpeedOfLight --section WarpStateStats --section LaunchStats \
  --clock-control none --cache-control none -k 'regex:merge_kernel' --launch-skip $((NMERGE - 40)) --launch-count 1 \
  $P bench -m $M --device cuda -p 0 -n 32 -d 32768 -r 1 -ctk q8_0 -ctv turbo3t --bandwidth 4240 > $OUT/ncu-merge.txt 2>&1
note "ncu merge rc=$?: $(grep -E 'Duration|Warp Cycles Per Issued|Grid Size' $OUT/ncu-merge.txt | tr -s ' ' | paste -sd';' | cut -c1-200)"
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf logs.tar.xz tests*.log bench.err && rm -f tests*.log bench.err
