#!/usr/bin/env bash
# Speculative decoding through the server (issue #10): `polykv serve` on the embedded model with the
# shipped draft model and MTP head; 1 and 8 concurrent agents on one named pool (a held-out code
# document), each with its own short suffix; spec none / ngram / draft / mtp interleaved, REPS
# repetitions; aggregate and per-agent tok/s, acceptance (from /metrics), lossless check.
# The client is bench/spec_server.py (Python standard library).
#
# Environment: BIN (build/polykv), MODEL, DRAFT, MTP (the shipped files), AGENTS (1,8), REPS (3),
#   MODES (none,ngram,draft,mtp,ngram:fixed,draft:fixed: "X:fixed" is drafter X with "spec_policy": "fixed"),
#   CONTEXT (1536: the pool's tokens; the embedded model's context is 2048), GEN (128), K (3),
#   THREADS (2), PORT (8093), OUT (docs/results/spec-2026-12-01d/spec_server.json)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/polykv}
MODEL=${MODEL:-models/polykv-code-26m-q8_0.gguf}
DRAFT=${DRAFT:-models/polykv-draft-q8_0.gguf}
MTP=${MTP:-models/polykv-code-26m-mtp-head-q8_0.gguf}
OUT=${OUT:-docs/results/spec-2026-12-01d/spec_server.json}
FIXTURES=${POLYKV_FIXTURES:-../shared/fixtures}
exec /usr/bin/python3 bench/spec_server.py --binary "$BIN" --model "$MODEL" --draft "$DRAFT" --mtp "$MTP" \
  --agents "${AGENTS:-1,8}" --modes "${MODES:-none,ngram,draft,mtp,ngram:fixed,draft:fixed}" --reps "${REPS:-3}" --context "${CONTEXT:-1536}" --gen "${GEN:-128}" \
  --spec-n-max "${K:-3}" --threads "${THREADS:-2}" --port "${PORT:-8093}" \
  --text "$FIXTURES/models/trained/ppl_dev.txt" --json "$OUT"
