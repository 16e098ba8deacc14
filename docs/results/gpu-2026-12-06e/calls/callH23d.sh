#!/usr/bin/env bash
# 2026-12-06e call H23d (issue #9), on the same warm H100 after H23c: synth qwen3-8b q4_K_M (H23's file) at depth
# 32768, one round, 2 repetitions: llama.cpp 3f545bec f16/f16 and q8_0/q8_0; polykv f16/f16, q8_0/q8_0, q8_0/turbo3t.
source scripts/gpu-lib.sh; call_setup >/dev/null; M=/tmp/q3-q4_K_M.gguf; LB=/tmp/llama.cpp/build/bin/llama-bench
for kv in "f16 f16" "q8_0 q8_0"; do set -- $kv
  timeout 80 $LB -m $M -ngl 99 -fa 1 -r 2 -o jsonl -p 0 -n 64 -d 32768 -ctk $1 -ctv $2 2>/dev/null | sed "s/^{/{\"round\":1,\"tag\":\"q3-d32768-$1-$2\",/" >> $OUT/llama.jsonl; done
for kv in "f16 f16" "q8_0 q8_0" "q8_0 turbo3t"; do set -- $kv
  timeout 80 $P bench -m $M --device cuda -r 2 --json -d 32768 -p 0 -n 64 -ctk $1 -ctv $2 2>/dev/null | grep '^{' | sed "s/^{/{\"round\":1,\"tag\":\"q3-d32768-$1-$2\",/" >> $OUT/polykv.jsonl; done
