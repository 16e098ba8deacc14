#!/usr/bin/env bash
# The long-context and many-agent figures of issue #9, run ON the GPU machine from the repo root with
# build-gpu/ carried (scripts/gpu-build.sh); no llama.cpp (scripts/gpu-compare.sh does the side by side):
#   1. decode tok/s at each of DEPTHS (default 131072) for each KV pair of KV_PAIRS (default
#      "q8_0/turbo3t f16/f16 q8_0/q8_0"), `polykv bench -p 0 -n 32 -r 2` (one fill per pair);
#   2. `polykv bench-agents` with AGENTS (default 1,16,64) on one shared AGENTS_CONTEXT (default 32768) context.
# Output under $OUT: summary.txt, depth.jsonl, agents.jsonl, polykv.log. Model: synth llama-3.1-8b q4_0 at
# POLYKV_GPU_MODEL (reused when the machine still has it from a previous call).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET=${POLYKV_GPU_BUDGET_S:-560}
MODEL=${POLYKV_GPU_MODEL:-/tmp/llama-3.1-8b-q4_0.gguf}
BIN=${POLYKV_GPU_BIN:-build-gpu}
SUMMARY=$OUT/summary.txt
T0=$SECONDS
STAGE_MIN_S=15 STAGE_WIDTH=52
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
setup_gpu_libraries
note "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1)"
if [[ ! -s $MODEL ]]; then
  stage "synth llama-3.1-8b q4_0" 150 "$OUT/polykv.log" \
    $BIN/polykv synth --shape llama-3.1-8b --type q4_0 -o "$MODEL" --threads "$(nproc)" || rm -f "$MODEL"
fi
part=$(mktemp)
for d in ${DEPTHS:-131072}; do
  for kv in ${KV_PAIRS:-q8_0/turbo3t f16/f16 q8_0/q8_0}; do
    # shellcheck disable=SC2016
    stage "polykv d$d $kv" 150 "$OUT/polykv.log" bash -c '"$@" >"$0"' "$part" \
      $BIN/polykv bench -m "$MODEL" --device cuda -p 0 -n 32 -d "$d" -r 2 -ctk "${kv%/*}" -ctv "${kv#*/}" --json \
      --bandwidth 4240 && grep '^{' "$part" >>"$OUT/depth.jsonl" &&
      note "     $(grep -oE '"decode_tok_s_reps":\[[^]]*\]' "$part")"
  done
done
if [[ -n ${AGENTS-1,16,64} ]]; then
  # shellcheck disable=SC2016
  stage "bench-agents ${AGENTS-1,16,64} x ${AGENTS_CONTEXT:-32768}" 240 "$OUT/polykv.log" bash -c '"$@" >"$0"' "$part" \
    $BIN/polykv bench-agents -m "$MODEL" --device cuda --agents "${AGENTS-1,16,64}" --share on \
    --context "${AGENTS_CONTEXT:-32768}" --suffix 32 --gen 32 --json &&
    grep '^{' "$part" >>"$OUT/agents.jsonl" && grep '^{' "$part" | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"kv_peak_bytes":[0-9]+|"pool_prefill_s":[0-9.]+' |
    paste -sd' ' | sed 's/^/     /' | tee -a "$SUMMARY"
fi
rm -f "$part"
note "done in $((SECONDS - T0)) s"
exit $failed
