#!/usr/bin/env bash
# 2026-12-06c call H18 (issue #9): matmul_multi of split parts of two types in one launch (matvec_split2_kernel):
# a Neox-style model's q, k, v in a K-quant mix (Qwen 2.5 in q4_K_M: q,k q4_K, v q6_K in half the layers) ran one
# launch per part. (0) GPU tests (two-type matmul_multi = one launch per part, bits; the fused q,k,v + RoPE tests);
# (1) synth qwen2.5-7b q4_K_M, POLYKV_CUDA_ROPE2=0 against the default, interleaved, 3 rounds f16/f16, 2 rounds
# q8_0/turbo3t, depth 0; (2) a timeline of each arm.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/traces
M=/tmp/q25-q4_K_M.gguf
timeout 300 $P synth --shape qwen2.5-7b --type q4_K_M -o $M --threads 14 >>$OUT/logs/synth.log 2>&1 &
SYN=$!
timeout 200 $T --gtest_filter='FuseDecCuda.*:DeferredNormCuda.QkvRope*:MatmulPartsCuda.*' --gtest_color=no \
  > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/logs/tests.log | head -10 >> $SUMMARY
wait $SYN; note "synth rc=$? at $((SECONDS-t0)) s: $(tail -1 $OUT/logs/synth.log)"
ab() {  # ab ARM ROUND CTK CTV
  local arm=$1 r=$2 k=$3 v=$4
  if [ $((SECONDS-t0)) -gt 420 ]; then note "skip $arm $k/$v r$r (time)"; return; fi
  POLYKV_CUDA_ROPE2=$arm timeout 90 $P bench -m $M --device cuda -ctk $k -ctv $v -d 0 -p 0 -n 128 -r 3 --bandwidth 3350 \
    --json 2>>$OUT/logs/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"rope2=$arm\",\"round\":$r,/" >>$OUT/ab.jsonl
  note "$k/$v rope2=$arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | tr -d '"')"
}
for r in 1 2 3; do
  arms="0 1"; [ $r = 2 ] && arms="1 0"
  for arm in $arms; do ab $arm $r f16 f16; done
  [ $r -le 2 ] && for arm in $arms; do ab $arm $r q8_0 turbo3t; done
done
for arm in 0 1; do
  POLYKV_CUDA_ROPE2=$arm CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-$arm.csv \
    timeout 60 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace-$arm.csv --skip 4 > $OUT/traces/trace-d0-q25-rope2-$arm.summary.txt 2>&1
  note "trace rope2=$arm: $(grep -E '^period' $OUT/traces/trace-d0-q25-rope2-$arm.summary.txt)"
done
cd $OUT && tar cJf h18-logs.tar.xz logs traces && rm -rf logs traces
note "done at $((SECONDS-t0)) s"
