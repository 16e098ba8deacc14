#!/usr/bin/env bash
# v1 against v2 expert kernels (docs/MOE.md "CUDA v2") on a 12-layer synth qwen3-30b-a3b through
# `polykv bench --device cuda`: one synth per TYPE, then one JSON line per (type, kernel) appended to
# OUT/moe-v1-v2.jsonl with the kernel and the machine load added. POLYKV_CUDA_MOE_KERNEL picks the
# kernels at upload (v1: ggml rows; v2: the split layout + tensor cores for prefill).
#   bench/moe_cuda_v2_bench.sh POLYKV [OUT] [REPS]
# Env: TYPES (default "q4_0 q4_K"), LAYERS (12), P (512), N (128), CTK/CTV (q8_0/q8_0), WORK (synth
# files, default $OUT/work, deleted unless KEEP=1), DEVICE (cuda; cpu only to smoke-test the script), BANDWIDTH
# (GB/s for bench's floor: polykv cannot measure a GPU's bandwidth; the H200 runs used 4240).
set -euo pipefail
polykv=${1:?usage: moe_cuda_v2_bench.sh POLYKV [OUT] [REPS]}
out=${2:-${OUT:-docs/results/moe-cuda-v2}}
reps=${3:-3}
types=${TYPES:-q4_0 q4_K}
layers=${LAYERS:-12}
p=${P:-512}
n=${N:-128}
work=${WORK:-$out/work}
mkdir -p "$out" "$work"
for t in $types; do
  f="$work/qwen3-30b-a3b-$t-l$layers.gguf"
  [ -f "$f" ] || "$polykv" synth --shape qwen3-30b-a3b --type "$t" --layers "$layers" -o "$f"
  for k in v1 v2; do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    if line=$(POLYKV_CUDA_MOE_KERNEL=$k "$polykv" bench -m "$f" --device "${DEVICE:-cuda}" -p "$p" -n "$n" -r "$reps" \
        --cache-type-k "${CTK:-q8_0}" --cache-type-v "${CTV:-q8_0}" ${BANDWIDTH:+--bandwidth "$BANDWIDTH"} --json 2> "$out/$t-$k.err"); then
      echo "${line%\}},\"moe_kernel\":\"$k\",\"layers\":$layers,\"loadavg\":\"$load\"}" >> "$out/moe-v1-v2.jsonl"
      echo "$t $k: $line"
    else
      echo "bench failed on $t $k (see $out/$t-$k.err)" >&2
    fi
  done
  [ "${KEEP:-0}" = 1 ] || rm -f "$f"
done
echo "results in $out/moe-v1-v2.jsonl"
