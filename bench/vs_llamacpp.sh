#!/usr/bin/env bash
# Side-by-side decode and prefill speed: polykv bench and llama.cpp's llama-bench on the same GGUF
# files, threads and KV depth, one after the other (docs/PERFORMANCE.md). llama.cpp is not part of
# polykv: build it yourself and pass its llama-bench. Its depth option is newer than some builds;
# LLAMA_BENCH_DEPTH is honoured by a build that fills the cache to that depth before each test
# (upstream's -d does the same).
# Usage: bench/vs_llamacpp.sh POLYKV_BINARY LLAMA_BENCH THREADS "DEPTHS" MODEL.gguf...
set -euo pipefail
polykv=$1 llama=$2 threads=$3 depths=$4
shift 4
for model in "$@"; do
  for d in $depths; do
    echo "== $(basename "$model") depth $d threads $threads"
    LLAMA_BENCH_DEPTH=$d "$llama" -m "$model" -p 512 -n 128 -t "$threads" -r 1 -ctk f16 -ctv f16 2>/dev/null | grep -E "pp512|tg128"
    "$polykv" bench -m "$model" -p 512 -n 128 -d "$d" -t "$threads" -ctk f16 -ctv f16 2>/dev/null | grep -E "pp512|tg128|weights read"
  done
done
