#!/usr/bin/env bash
# 2026-12-04d call V11: deferred norms at depth 32768 (synth llama-3.1-8b q4_0, q8_0/turbo3t and f16/f16):
# the default against POLYKV_CUDA_DEFER_NORM=0, interleaved, 2 rounds x 2 repetitions.
source scripts/gpu-lib.sh; call_setup
L=/tmp/l8b-q4_0.gguf
timeout 200 $P synth --shape llama-3.1-8b --type q4_0 -o $L > $OUT/synth.log 2>&1
for r in 0 1; do
  for kv in "q8_0 turbo3t" "f16 f16"; do
    set -- $kv
    for v in defer plain; do
      env POLYKV_CUDA_DEFER_NORM=$([ $v = plain ] && echo 0 || echo 1) timeout 90 $P bench -m $L --device cuda -d 32768 -p 0 -n 128 -r 2 \
        -ctk $1 -ctv $2 --bandwidth 4240 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$r,/" >> $OUT/ab.jsonl
      note "r$r l8b d32768 $1/$2 $v: $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
