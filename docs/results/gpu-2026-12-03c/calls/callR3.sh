#!/usr/bin/env bash
# 2026-12-03 (third session) call R3, a diagnostic build (commit "DIAG", dropped after): where the gated fold's
# 4 us a layer go. POLYKV_DIAG_PAIR_ONLY=1: the fold's kernel without the arrivals and the quantization (its
# activations are then wrong: timing only). llama-3.1-8b q4_0 f16/f16 depth 0, one timeline each of
# plain (POLYKV_CUDA_FUSE_GATED=0), gated, pair-only.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 16 > /dev/null 2>&1
B="--device cuda --json --bandwidth 4240"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
for v in plain gated pair; do
  e=POLYKV_NONE=1; [ $v = plain ] && e=POLYKV_CUDA_FUSE_GATED=0; [ $v = pair ] && e=POLYKV_DIAG_PAIR_ONLY=1
  env $e CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d0-$v.csv timeout 90 $P bench -m $M $B -ctk f16 -ctv f16 -p 512 -n 64 -r 1 > /dev/null 2>>$OUT/bench.err
  python3 scripts/cuda_trace_summary.py $OUT/trace-d0-$v.csv --skip 4 > $OUT/trace-d0-$v.summary.txt 2>&1 && rm -f $OUT/trace-d0-$v.csv
  note "$v: $(sed -n 2p $OUT/trace-d0-$v.summary.txt)"; grep -E "gated|matvec_split_kernel" $OUT/trace-d0-$v.summary.txt >> $SUMMARY
done
note "done at $((SECONDS-t0)) s"
