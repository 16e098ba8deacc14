#!/usr/bin/env bash
# 2026-12-06c call H16 (issue #9): q, k, v with RoPE in one launch when v has another type (matvec_split_rope2_kernel,
# matmul_cuda_split.cu). H15's timeline of synth llama-3.1-8b q4_K_M at depth 0 showed the 16 layers whose attn_v is
# q6_K running q,k (q4_K), v (q6_K) and rope_qk as three launches. (0) GPU tests of the fused q,k,v launch (every pair,
# the deferred norm, a q4_K_M model: fused = plain bits), default and POLYKV_CUDA_ROPE2=3; (1) A/B/C interleaved,
# 3 rounds, order rotated: POLYKV_CUDA_ROPE2=0 (before), 2 (default: 2 blocks an SM, no spills), 3 (3 blocks, spills);
# f16/f16 and q8_0/turbo3t at depth 0; (2) a timeline of each arm (f16/f16).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/traces
M=/tmp/l8-q4_K_M.gguf
timeout 300 $P synth --shape llama-3.1-8b --type q4_K_M -o $M --threads 14 >>$OUT/logs/synth.log 2>&1 &
SYN=$!
F='FuseDecCuda.*:DeferredNormCuda.*:MatvecSplitCuda.*:ModelFusedCuda.*'
timeout 240 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests-default.log 2>&1
note "tests default: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests-default.log | paste -sd' ')"
POLYKV_CUDA_ROPE2=3 timeout 120 $T --gtest_filter='FuseDecCuda.*:DeferredNormCuda.QkvRope*' --gtest_color=no \
  > $OUT/logs/tests-rope2-3.log 2>&1
note "tests ROPE2=3: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests-rope2-3.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure|error' $OUT/logs/tests-*.log | head -20 >> $SUMMARY
wait $SYN; note "synth rc=$? at $((SECONDS-t0)) s: $(tail -1 $OUT/logs/synth.log)"
ab() {  # ab ARM ROUND CTK CTV
  local arm=$1 r=$2 k=$3 v=$4
  if [ $((SECONDS-t0)) -gt 500 ]; then note "skip $arm $k/$v r$r (time)"; return; fi
  POLYKV_CUDA_ROPE2=$arm timeout 90 $P bench -m $M --device cuda -ctk $k -ctv $v -d 0 -p 0 -n 128 -r 3 --bandwidth 3350 \
    --json 2>>$OUT/logs/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"rope2=$arm\",\"round\":$r,/" >>$OUT/ab.jsonl
  note "$k/$v rope2=$arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | tr -d '"')"
}
for r in 1 2 3; do
  arms="0 2 3"; [ $r = 2 ] && arms="3 0 2"; [ $r = 3 ] && arms="2 3 0"
  for kv in "f16 f16" "q8_0 turbo3t"; do for arm in $arms; do ab $arm $r $kv; done; done
done
for arm in 0 2 3; do
  POLYKV_CUDA_ROPE2=$arm CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-$arm.csv \
    timeout 60 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace-$arm.csv --skip 4 > $OUT/traces/trace-d0-rope2-$arm.summary.txt 2>&1
  note "trace rope2=$arm: $(grep -E '^period' $OUT/traces/trace-d0-rope2-$arm.summary.txt)"
done
cd $OUT && tar cJf h16-logs.tar.xz logs traces && rm -rf logs traces
note "done at $((SECONDS-t0)) s"
