#!/usr/bin/env bash
# 2026-12-05 call Y1: the L2 prefetch hint (Backend::prefetch_weights; backend/cuda/l2_prefetch.h) on synth
# llama-3.1-8b q4_0. Its GPU tests first; then decode with POLYKV_CUDA_PREFETCH_MB = 0 (off) / 16 / 32 / 64,
# interleaved run by run in 2 rounds: depth 0 for f16/f16, q8_0/q8_0, q8_0/turbo3t (-n 128 -r 3); depth 4096
# q8_0/turbo3t; depth 32768 q8_0/turbo3t with the KV limit lifted (the default skips the hint there). Then one
# timeline of the default at depth 0.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/l8-q4_0.gguf
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > $OUT/synth.log 2>&1
note "synth done at $((SECONDS-t0)) s"
timeout 120 $T --gtest_filter='L2PrefetchCuda.*' > $OUT/prefetch-tests.log 2>&1
note "L2PrefetchCuda rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/prefetch-tests.log | paste -sd' ')"
pk() {  # pk ROUND TAG MB KV_MB ARGS...
  local r=$1 tag=$2 mb=$3 kvmb=$4; shift 4
  POLYKV_CUDA_PREFETCH_MB=$mb POLYKV_CUDA_PREFETCH_KV_MB=$kvmb timeout 150 $P bench -m $M --device cuda --json \
    --bandwidth 4240 "$@" 2>>$OUT/bench.err | grep '^{' |
    sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",\"prefetch_mb\":$mb,\"prefetch_kv_mb\":$kvmb,/" >> $OUT/ab.jsonl
  note "$tag mb=$mb r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  for kv in "f16 f16" "q8_0 q8_0" "q8_0 turbo3t"; do
    set -- $kv
    for mb in 0 16 32 64; do pk $r d0-$1-$2 $mb 16 -r 3 -p 0 -n 128 -d 0 -ctk $1 -ctv $2; done
  done
  for mb in 0 32; do pk $r d4096-q8_0-turbo3t $mb 16 -r 3 -p 0 -n 64 -d 4096 -ctk q8_0 -ctv turbo3t; done
done
for mb in 0 32; do pk 1 d32768-q8_0-turbo3t $mb 100000 -r 2 -p 0 -n 64 -d 32768 -ctk q8_0 -ctv turbo3t; done
CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/d0-pf.csv \
  timeout 90 $P bench -m $M --device cuda -d 0 -p 0 -n 64 -r 1 -ctk q8_0 -ctv turbo3t --bandwidth 4240 --json >/dev/null 2>>$OUT/bench.err
python3 scripts/cuda_trace_summary.py $OUT/d0-pf.csv --skip 8 --top 40 > $OUT/d0-pf.summary.txt 2>&1
note "$(head -2 $OUT/d0-pf.summary.txt | tr '\n' ' ')"
xz -9 $OUT/d0-pf.csv
note "done at $((SECONDS-t0)) s"
