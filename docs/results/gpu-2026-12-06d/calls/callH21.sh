#!/usr/bin/env bash
# 2026-12-06d call H21 (issue #9): narrow q4_K heads in the split mat-vec (hd::kNarrowHead, matmul_cuda_split.cuh): a
# lane loads one word of its block's 16-byte head and the warp gathers the rest by shuffles, so a q4_K chunk keeps 4
# steps of two rows in flight (128 quant bytes a lane, as q4_0) instead of 2. (0) GPU tests of the split mat-vecs and
# the fused launches (same bits as before); (1) the standalone mat-vec bench, POLYKV_CUDA_KHEAD=wide vs narrow;
# (2) decode A/B interleaved, order swapped each round: synth llama-3.1-8b q4_K_M f16/f16 and q8_0/turbo3t, q4_K
# f16/f16, depth 0; (3) a timeline of each arm (q4_K_M f16/f16).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/traces
M=/tmp/l8-q4_K_M.gguf
K=/tmp/l8-q4_K.gguf
( timeout 200 $P synth --shape llama-3.1-8b --type q4_K_M -o $M --threads 14 >>$OUT/logs/synth.log 2>&1
  timeout 200 $P synth --shape llama-3.1-8b --type q4_K -o $K --threads 14 >>$OUT/logs/synth.log 2>&1 ) &
SYN=$!
F='MatvecSplitCuda.*:FuseDecCuda.*:DeferredNormCuda.*:ModelFusedCuda.*:CudaSplitLayout.*'
timeout 240 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests-default.log 2>&1
note "tests narrow: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests-default.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure|error' $OUT/logs/tests-*.log | head -20 >> $SUMMARY
for arm in wide narrow; do
  POLYKV_CUDA_KHEAD=$arm timeout 100 $T --gtest_also_run_disabled_tests --gtest_filter='MatvecSplitCudaBench.DISABLED_OldVsSplit' \
    --gtest_color=no > $OUT/logs/kbench-$arm.log 2>&1
  note "kbench $arm rc=$?"; grep -E '^(q4_K|type|device)' $OUT/logs/kbench-$arm.log >> $SUMMARY
done
wait $SYN; note "synth rc=$? at $((SECONDS-t0)) s: $(tail -1 $OUT/logs/synth.log)"
ab() {  # ab ARM ROUND MODEL CTK CTV
  local arm=$1 r=$2 m=$3 k=$4 v=$5
  if [ $((SECONDS-t0)) -gt 520 ]; then note "skip $arm $m $k/$v r$r (time)"; return; fi
  POLYKV_CUDA_KHEAD=$arm timeout 90 $P bench -m $m --device cuda -ctk $k -ctv $v -d 0 -p 0 -n 128 -r 3 --bandwidth 3350 \
    --json 2>>$OUT/logs/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"khead=$arm\",\"round\":$r,/" >>$OUT/ab.jsonl
  note "$(basename $m) $k/$v $arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | tr -d '"')"
}
for r in 1 2; do
  arms="wide narrow"; [ $r = 2 ] && arms="narrow wide"
  for cfg in "$M f16 f16" "$K f16 f16" "$M q8_0 turbo3t"; do for arm in $arms; do ab $arm $r $cfg; done; done
done
for arm in wide narrow; do
  POLYKV_CUDA_KHEAD=$arm CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-$arm.csv \
    timeout 60 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace-$arm.csv --skip 4 > $OUT/traces/trace-d0-$arm.summary.txt 2>&1
  note "trace $arm: $(grep -E '^period' $OUT/traces/trace-d0-$arm.summary.txt)"
done
cd $OUT && tar cJf h21-logs.tar.xz logs traces && rm -rf logs traces
note "done at $((SECONDS-t0)) s"
