#!/usr/bin/env bash
# MoE decode / prefill on the CUDA backend (docs/MOE.md "CUDA"): synthesizes qwen3-30b-a3b (all 48
# layers unless LAYERS is set) in each TYPE and runs `polykv bench --device cuda`, writing one JSON per
# type/depth under OUT plus the machine load. The floor `polykv bench` prints is the active experts'
# bytes (moe_active_bytes) + the dense weights + the KV read, over the GPU's measured bandwidth.
#   bench/moe_cuda_bench.sh POLYKV [OUT] [REPS]
# Env: TYPES (default "q4_0 q8_0 q4_K mxfp4"), LAYERS, P (prompt, 512), N (decode tokens, 128),
# DEPTHS ("0 4096"), WORK (synth files, default $OUT/work; deleted after use unless KEEP=1),
# CTK/CTV (KV types, q8_0/q8_0).
set -euo pipefail
polykv=${1:?usage: moe_cuda_bench.sh POLYKV [OUT] [REPS]}
out=${2:-${OUT:-docs/results/moe-cuda}}
reps=${3:-3}
types=${TYPES:-q4_0 q8_0 q4_K mxfp4}
p=${P:-512}
n=${N:-128}
depths=${DEPTHS:-0 4096}
work=${WORK:-$out/work}
ctk=${CTK:-q8_0}
ctv=${CTV:-q8_0}
mkdir -p "$out" "$work"
layers_arg=()
[ -n "${LAYERS:-}" ] && layers_arg=(--layers "$LAYERS")
uptime > "$out/load_before.txt"
for t in $types; do
  f="$work/qwen3-30b-a3b-$t.gguf"
  [ -f "$f" ] || "$polykv" synth --shape qwen3-30b-a3b --type "$t" -o "$f" "${layers_arg[@]}"
  for d in $depths; do
    "$polykv" bench -m "$f" --device cuda -p "$p" -n "$n" -d "$d" -r "$reps" --cache-type-k "$ctk" --cache-type-v "$ctv" --json \
      > "$out/qwen3-30b-a3b-$t-d$d.json" 2> "$out/qwen3-30b-a3b-$t-d$d.err" ||
      echo "bench failed on $t depth $d (see $out/qwen3-30b-a3b-$t-d$d.err)" >&2
  done
  [ "${KEEP:-0}" = 1 ] || rm -f "$f"
done
uptime > "$out/load_after.txt"
echo "results in $out"
