#!/usr/bin/env bash
# 2026-12-04c call U3: where a hybrid decode token goes on the H200. Synth Qwen3.5-9B q4_0 (made here),
# in-graph kernel timelines (tools/cuda_trace) of bench decode at depth 0, f16/f16 and q8_0/turbo3t, and of
# the dense synth llama-3.1-8b q4_0 for comparison; summaries by scripts/cuda_trace_summary.py.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
Q=/tmp/q35-9b-q4_0.gguf L=/tmp/l8b-q4_0.gguf
timeout 150 $P synth --shape qwen3.5-9b --type q4_0 -o $Q > $OUT/synth.log 2>&1 &
timeout 150 $P synth --shape llama-3.1-8b --type q4_0 -o $L >> $OUT/synth.log 2>&1
wait; note "synth at $((SECONDS-t0)) s"
trace() {  # NAME MODEL CTK CTV
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/$1.csv \
    timeout 90 $P bench -m $2 --device cuda -d 0 -p 0 -n 64 -r 1 -ctk $3 -ctv $4 --bandwidth 4240 --json \
    2>>$OUT/bench.err | grep '^{' >> $OUT/trace_bench.jsonl
  python3 scripts/cuda_trace_summary.py $OUT/$1.csv --skip 8 --top 40 > $OUT/$1.summary.txt 2>&1
  note "$1: $(head -4 $OUT/$1.summary.txt | tr '\n' ' ')"
}
trace q35-f16 $Q f16 f16
trace q35-q8t3t $Q q8_0 turbo3t
trace l8b-f16 $L f16 f16
cd $OUT && xz -9 *.csv
