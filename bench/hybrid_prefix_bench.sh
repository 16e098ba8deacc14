#!/usr/bin/env bash
# Automatic prefix caching on a hybrid (Gated DeltaNet) model: bench-agents with the context shared as a
# named pool (on), not at all (off, a cache_salt per agent) and by automatic prefix caching (prefix: the
# recurrent-state checkpoints of kv/state_checkpoints.h), agents arriving one after another's first token.
# The three modes run interleaved within each repetition. Writes JSON lines to $OUT.
#   BIN=build-cpu/polykv SHAPE=qwen3.5-9b TYPE=q4_0 LAYERS=4 CONTEXT=4000 SUFFIX=100 AGENTS=4 REPS=3 \
#     OUT=docs/results/hybrid-prefix-2026-12-04/agents_ctx4000_sfx100.jsonl bench/hybrid_prefix_bench.sh
set -euo pipefail
BIN=${BIN:-build-cpu/polykv}
SHAPE=${SHAPE:-qwen3.5-9b}
TYPE=${TYPE:-q4_0}
LAYERS=${LAYERS:-4}
CONTEXT=${CONTEXT:-4096}
AGENTS=${AGENTS:-4}
REPS=${REPS:-3}
THREADS=${THREADS:-2}
SUFFIX=${SUFFIX:-32}
OUT=${OUT:-/tmp/hybrid_prefix.jsonl}
MODEL=${MODEL:-/tmp/synth-$SHAPE-l$LAYERS-$TYPE.gguf}
[ -f "$MODEL" ] || "$BIN" synth --shape "$SHAPE" --type "$TYPE" --layers "$LAYERS" -o "$MODEL"
"$BIN" bench-agents -m "$MODEL" --agents "$AGENTS" --context "$CONTEXT" --suffix "$SUFFIX" --gen 32 --share all \
  --arrival staggered -t "$THREADS" -r "$REPS" --json | tee "$OUT"
