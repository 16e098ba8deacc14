#!/usr/bin/env bash
# 2026-12-06d call H21 (issue #9), two changes of the decode mat-vecs:
#  (a) narrow q4_K heads (hd::kNarrowHead, matmul_cuda_split.cuh): a lane loads one word of its block's 16-byte head
#      and the warp gathers the rest by shuffles, so a q4_K chunk keeps 4 steps of two rows in flight (128 quant bytes
#      a lane, as q4_0) instead of 2; POLYKV_CUDA_KHEAD=wide is the path before;
#  (b) q, k, v biases and Neox-style RoPE in the fused q,k,v epilogue (Qwen 2.x decoded add_bias x 3 and rope_qk as
#      four launches a layer); POLYKV_CUDA_FUSE_ROPE=norm is the path before.
# (0) GPU tests (same bits as the plain ops; the qwen2 fixture as q8_0); (1) decode A/B interleaved, order swapped
# each round, 2 rounds, depth 0, f16/f16: llama-3.1-8b q4_K_M and q4_K (wide / narrow), qwen2.5-7b q4_K_M (norm /
# all); (2) timelines of the new defaults.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/traces
M=/tmp/l8-q4_K_M.gguf; K=/tmp/l8-q4_K.gguf; Q=/tmp/q25-q4_K_M.gguf
( timeout 150 $P synth --shape llama-3.1-8b --type q4_K_M -o $M --threads 14 >>$OUT/logs/synth.log 2>&1
  timeout 150 $P synth --shape llama-3.1-8b --type q4_K -o $K --threads 14 >>$OUT/logs/synth.log 2>&1
  timeout 150 $P synth --shape qwen2.5-7b --type q4_K_M -o $Q --threads 14 >>$OUT/logs/synth.log 2>&1 ) &
SYN=$!
F='MatvecSplitCuda.*:FuseDecCuda.*:DeferredNormCuda.*:ModelFusedCuda.*:CudaSplitLayout.*'
timeout 200 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests-default.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests-default.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure|error' $OUT/logs/tests-*.log | head -20 >> $SUMMARY
wait $SYN; note "synth rc=$? at $((SECONDS-t0)) s: $(grep -c . $OUT/logs/synth.log) lines"
ab() {  # ab VAR ARM ROUND MODEL
  local var=$1 arm=$2 r=$3 m=$4
  if [ $((SECONDS-t0)) -gt 540 ]; then note "skip $var=$arm $m r$r (time)"; return; fi
  env $var=$arm timeout 60 $P bench -m $m --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 128 -r 3 --bandwidth 3350 \
    --json 2>>$OUT/logs/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"$var=$arm\",\"round\":$r,/" >>$OUT/ab.jsonl
  note "$(basename $m) $var=$arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | tr -d '"')"
}
for r in 1 2; do
  a1=wide; a2=narrow; b1=norm; b2=1; [ $r = 2 ] && { a1=narrow; a2=wide; b1=1; b2=norm; }
  ab POLYKV_CUDA_KHEAD $a1 $r $M; ab POLYKV_CUDA_KHEAD $a2 $r $M
  ab POLYKV_CUDA_FUSE_ROPE $b1 $r $Q; ab POLYKV_CUDA_FUSE_ROPE $b2 $r $Q
  ab POLYKV_CUDA_KHEAD $a1 $r $K; ab POLYKV_CUDA_KHEAD $a2 $r $K
done
for m in $M $Q; do
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 40 $P bench -m $m --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-$(basename $m .gguf).summary.txt 2>&1
  note "trace $(basename $m): $(grep -E '^period' $OUT/traces/trace-d0-$(basename $m .gguf).summary.txt)"
done
cd $OUT && tar cJf h21-logs.tar.xz logs traces && rm -rf logs traces
note "done at $((SECONDS-t0)) s"
