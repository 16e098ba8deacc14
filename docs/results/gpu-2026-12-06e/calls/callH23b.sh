#!/usr/bin/env bash
# 2026-12-06e call H23b (issue #9), right after H23 on the same warm H100 (its /tmp/q3-q4_K_M.gguf): H23's A/B of
# POLYKV_CUDA_FUSE_QKNORM ran while the qwen2.5 file was being made on the host's 14 cores (its host gaps in the
# timeline: 181 us a token against 34-56), so it was run again here on a quiet host: 3 rounds, arms alternated
# (round 2 swapped), f16/f16 and q8_0/turbo3t at depth 0; then a timeline of each arm. (Run as one command line.)
source scripts/gpu-lib.sh; call_setup >/dev/null; M=/tmp/q3-q4_K_M.gguf
for r in 1 2 3; do for a in 0 1; do [ $r = 2 ] && a=$((1-a)); for kv in "f16 f16" "q8_0 turbo3t"; do set -- $kv
  POLYKV_CUDA_FUSE_QKNORM=$a timeout 60 $P bench -m $M --device cuda -r 3 --json --bandwidth 3350 -p 0 -n 128 -ctk $1 -ctv $2 2>/dev/null | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"qknorm-$a-$1-$2\",/" >> $OUT/ab.jsonl
  echo "r$r qknorm=$a $1/$2: $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"; done; done; done
for a in 0 1; do
  POLYKV_CUDA_FUSE_QKNORM=$a CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv timeout 40 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 >/dev/null 2>&1
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/trace-d0-q3-qknorm$a.summary.txt 2>&1
  echo "trace $a: $(grep -E '^period' $OUT/trace-d0-q3-qknorm$a.summary.txt)"; done
