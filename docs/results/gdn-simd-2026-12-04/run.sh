#!/usr/bin/env bash
# The interleaved A/B runs behind docs/HYBRID.md "CPU kernels" (2026-12-04), as they were run (Zen 5 VM, 2 threads,
# f16 KV). Binaries: OLD = main at a3c2641 plus the bench warm-up / argmax_first change (so both sides warm up
# alike); TOKENSTEP = 7b1f474 (SIMD token step, no copy of the previous state); CHUNKED = 5f5874d (+ SIMD chunked
# prefill). Synth files from `polykv synth --shape S --type q4_0 --layers L` (bench/moe_bench.sh writes them).
# Then: /usr/bin/python3 summarize.py > summary.json
set -euo pipefail
OLD=${OLD:?} TOKENSTEP=${TOKENSTEP:?} CHUNKED=${CHUNKED:?}
Q35MOE=${Q35MOE:-/tmp/moefiles/qwen3.5-35b-a3b-q4_0-L8.gguf} Q35=${Q35:-/tmp/moefiles/qwen3.5-9b-q4_0-L32.gguf}
b() { "$@" -t 2 -ctk f16 -ctv f16 --json 2>/dev/null; }
for r in 1 2 3 4; do  # decode (and pp64) of qwen3.5-35b-a3b: the token step
  b "$OLD" bench -m "$Q35MOE" -p 64 -n 64 -r 2 > q35-35b-decode-old-r$r.json
  b "$TOKENSTEP" bench -m "$Q35MOE" -p 64 -n 64 -r 2 > q35-35b-decode-tokenstep-r$r.json
done
for r in 1 2 3; do  # pp512 of qwen3.5-35b-a3b: the chunked prefill
  b "$TOKENSTEP" bench -m "$Q35MOE" -p 512 -n 0 -r 2 > q35-35b-pp512-tokenstep-only-r$r.json
  b "$CHUNKED" bench -m "$Q35MOE" -p 512 -n 0 -r 2 > q35-35b-pp512-chunked-r$r.json
done
for r in 1 2 3; do  # qwen3.5-9b (24 of 32 layers Gated DeltaNet): both changes
  b "$OLD" bench -m "$Q35" -p 512 -n 32 -r 2 > q35-9b-old-r$r.json
  b "$CHUNKED" bench -m "$Q35" -p 512 -n 32 -r 2 > q35-9b-chk-r$r.json
done
