#!/usr/bin/env bash
# 2026-12-06e call H23c (issue #9), on the same warm H100 after H23b (llama.cpp 3f545bec as H23 built it in
# /tmp/llama.cpp): synth gemma-3-4b q4_K_M; POLYKV_CUDA_FUSE_QKNORM A/B (2 rounds, f16/f16, depth 0); then
# llama.cpp and polykv interleaved, 2 rounds: decode at depth 0 (f16/f16) and pp512. (Run as one command line.)
source scripts/gpu-lib.sh; call_setup >/dev/null; G=/tmp/g3-q4_K_M.gguf; t0=$SECONDS
timeout 150 $P synth --shape gemma-3-4b --type q4_K_M -o $G --threads 16 > /dev/null 2>&1; echo "synth rc=$? $((SECONDS-t0)) s"
LB=/tmp/llama.cpp/build/bin/llama-bench
for r in 1 2; do for a in 0 1; do [ $r = 2 ] && a=$((1-a))
  POLYKV_CUDA_FUSE_QKNORM=$a timeout 60 $P bench -m $G --device cuda -r 3 --json --bandwidth 3350 -p 0 -n 128 -ctk f16 -ctv f16 2>/dev/null | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"g3-qknorm-$a-f16-f16\",/" >> $OUT/ab.jsonl
  echo "r$r qknorm=$a: $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"; done; done
for r in 1 2; do
  timeout 60 $LB -m $G -ngl 99 -fa 1 -r 3 -o jsonl -p 0 -n 128 2>/dev/null | sed "s/^{/{\"round\":$r,\"tag\":\"g3-tg-f16\",/" >> $OUT/llama.jsonl
  timeout 60 $P bench -m $G --device cuda -r 3 --json -p 0 -n 128 -ctk f16 -ctv f16 2>/dev/null | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"g3-tg-f16\",/" >> $OUT/polykv.jsonl
  timeout 60 $LB -m $G -ngl 99 -fa 1 -r 3 -o jsonl -p 512 -n 0 2>/dev/null | sed "s/^{/{\"round\":$r,\"tag\":\"g3-pp512\",/" >> $OUT/llama.jsonl
  timeout 60 $P bench -m $G --device cuda -r 3 --json -p 512 -n 1 -ctk f16 -ctv f16 2>/dev/null | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"g3-pp512\",/" >> $OUT/polykv.jsonl
done
