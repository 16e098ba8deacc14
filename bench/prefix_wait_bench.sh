#!/usr/bin/env bash
# Prefix-aware admission: agents that arrive together on one document with no named pool (bench-agents
# --share prefix --arrival together), with the engine's wait for a running prefix on and off, interleaved
# within each repetition. Writes JSON lines (one per run, "prefix_wait" says which) to $OUT.
#   BIN=build-cpu/polykv MODEL=models/polykv-code-26m-q8_0.gguf AGENTS=4,16 CONTEXT=4096 REPS=3 \
#     OUT=docs/results/prefix-wait-2026-12-04/embedded.jsonl bench/prefix_wait_bench.sh
set -euo pipefail
BIN=${BIN:-build-cpu/polykv}
MODEL=${MODEL:-models/polykv-code-26m-q8_0.gguf}
AGENTS=${AGENTS:-4,16}
CONTEXT=${CONTEXT:-4096}
SUFFIX=${SUFFIX:-32}
GEN=${GEN:-32}
REPS=${REPS:-3}
THREADS=${THREADS:-2}
OUT=${OUT:-/tmp/prefix_wait.jsonl}
: > "$OUT"
for ((r = 0; r < REPS; ++r)); do
  for wait in on off; do
    "$BIN" bench-agents -m "$MODEL" --agents "$AGENTS" --context "$CONTEXT" --suffix "$SUFFIX" --gen "$GEN" \
      --share prefix --arrival together --prefix-wait $wait -t "$THREADS" --json 2>/dev/null |
      sed "s/^{/{\"round\":$r,/" | tee -a "$OUT"
  done
done
