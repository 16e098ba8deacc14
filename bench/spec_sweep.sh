#!/usr/bin/env bash
# Speculative-decoding sweep (issue #10): for every drafter (ngram, draft, mtp), text (code, prose,
# shell; bench/spec_corpora.py builds them from the fixtures, deterministically: held-out Python, its
# docstrings and comments, a generated shell-session transcript), depth and --spec-n-max, one `polykv bench --spec` run:
# greedy, REPS interleaved repetitions of plain vs speculative decode in one process (the ratio per
# repetition and its spread), acceptance rate, tokens per verify step, and a losslessness check
# (the speculative tokens must equal the plain ones, else the cell fails).
#
# Environment (defaults = the full grid):
#   MODEL     target GGUF (models/polykv-code-26m-q8_0.gguf)
#   DRAFT     draft model for --spec draft (default: the shipped models/polykv-draft-q8_0.gguf; "copy": a
#             q4_0 copy of MODEL made with `polykv quantize`)
#   MTP       MTP head side file for --spec mtp (--model-mtp; default: the shipped
#             models/polykv-code-26m-mtp-head-q8_0.gguf when MODEL is the embedded model; "none": MODEL's own nextn layers)
#   DRAFTERS  "ngram draft mtp"  (mtp is skipped when MODEL has no nextn layers or the build has no MTP)
#   TEXTS     "code prose shell"
#   DEPTHS    "0 4096"  (the embedded model's context is 2048 tokens: past it, give ROPE; 16384 also
#             needs a longer prose text than the held-out docstrings: see docs/SPECULATIVE.md)
#   ROPE      RoPE options for the target and the draft model, e.g. "--rope-scaling yarn --rope-scale 4"
#             (YaRN: the embedded model at 4x its training context, docs/SPECULATIVE.md 2026-12-04)
#   NMAX      "1 2 3 4"
#   POLICY    adaptive (K is the upper bound of each step's drafts) or fixed (always K drafts)
#   REPS 3  NPROMPT 256  NGEN 128  THREADS 2
#   OUT       docs/results/spec-2026-12-01b/sweep.json
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/polykv}
MODEL=${MODEL:-models/polykv-code-26m-q8_0.gguf}
DRAFTERS=${DRAFTERS:-ngram draft mtp}
TEXTS=${TEXTS:-code prose shell}
DEPTHS=${DEPTHS:-0 4096}
NMAX=${NMAX:-1 2 3 4}
POLICY=${POLICY:-adaptive}
REPS=${REPS:-3}
NPROMPT=${NPROMPT:-256}
NGEN=${NGEN:-128}
THREADS=${THREADS:-2}
OUT=${OUT:-docs/results/spec-2026-12-01b/sweep.json}
read -r -a ROPE_ARGS <<<"${ROPE:-}"
FIXTURES=${POLYKV_FIXTURES:-../shared/fixtures}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

/usr/bin/python3 bench/spec_corpora.py "$FIXTURES/models/trained" "$WORK" 2>/dev/null
if [[ -z "${DRAFT:-}" && -f models/polykv-draft-q8_0.gguf ]]; then DRAFT=models/polykv-draft-q8_0.gguf; fi
if [[ -z "${MTP:-}" && $MODEL == models/polykv-code-26m-q8_0.gguf ]]; then MTP=models/polykv-code-26m-mtp-head-q8_0.gguf; fi
[[ ${MTP:-} == none ]] && MTP=
if [[ ( -z "${DRAFT:-}" || $DRAFT == copy ) && " $DRAFTERS " == *" draft "* ]]; then
  DRAFT="$WORK/draft-q4_0.gguf"
  "$BIN" quantize "$MODEL" "$DRAFT" q4_0 >/dev/null
fi
mkdir -p "$(dirname "$OUT")"
CELLS="$WORK/cells.jsonl"
: >"$CELLS"
for drafter in $DRAFTERS; do
  extra=()
  [[ $drafter == draft ]] && extra=(--model-draft "$DRAFT")
  [[ $drafter == mtp && -n "${MTP:-}" ]] && extra=(--model-mtp "$MTP")
  if [[ $drafter == mtp ]]; then
    # Skip cleanly when the model has no MTP head or this build cannot draft with one.
    if ! "$BIN" run -m "$MODEL" "${ROPE_ARGS[@]}" -n 1 -p x --spec mtp "${extra[@]}" -t 1 >/dev/null 2>"$WORK/mtp.err"; then
      echo "skip mtp: $(tail -1 "$WORK/mtp.err")" >&2
      printf '{"spec":"mtp","skipped":%s}\n' "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$(tail -1 "$WORK/mtp.err")")" >>"$CELLS"
      continue
    fi
  fi
  for text in $TEXTS; do
    for depth in $DEPTHS; do
      for n in $NMAX; do
        echo "== $drafter $text depth $depth n-max $n" >&2
        if "$BIN" bench -m "$MODEL" "${ROPE_ARGS[@]}" --spec "$drafter" --spec-n-max "$n" --spec-policy "$POLICY" "${extra[@]}" --text "$WORK/$text.txt" \
            -d "$depth" -p "$NPROMPT" -n "$NGEN" -r "$REPS" -t "$THREADS" --json >"$WORK/cell.json" 2>"$WORK/cell.err"; then
          python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["text_kind"]=sys.argv[2]; print(json.dumps(j))' \
            "$WORK/cell.json" "$text" >>"$CELLS"
          python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("   accept %.1f%%  tok/step %.2f  speedup %.2fx (%.2f..%.2f)" % (100*j["acceptance_rate"], j["tokens_per_step"], j["speedup_median"], j["speedup_min"], j["speedup_max"]))' "$WORK/cell.json" >&2
        else
          echo "   failed: $(tail -1 "$WORK/cell.err")" >&2
          python3 -c 'import json,sys; print(json.dumps({"spec":sys.argv[1],"text_kind":sys.argv[2],"depth":int(sys.argv[3]),"spec_n_max":int(sys.argv[4]),"error":sys.argv[5]}))' \
            "$drafter" "$text" "$depth" "$n" "$(tail -1 "$WORK/cell.err")" >>"$CELLS"
        fi
      done
    done
  done
done
python3 - "$CELLS" "$OUT" "$MODEL" "${DRAFT:-}" "$REPS" "$NPROMPT" "$NGEN" "$THREADS" "$(uptime)" "$(git rev-parse --short HEAD)" "${MTP:-}" "${ROPE:-}" <<'PY'
import json, sys, datetime
cells = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = {
    "what": "speculative decoding n-max sweep (bench/spec_sweep.sh); greedy; plain and speculative decode interleaved per repetition",
    "date": datetime.datetime.utcnow().isoformat() + "Z", "commit": sys.argv[10],
    "model": sys.argv[3], "model_draft": sys.argv[4], "model_mtp": sys.argv[11], "rope": sys.argv[12], "reps": int(sys.argv[5]), "n_prompt": int(sys.argv[6]),
    "n_gen": int(sys.argv[7]), "threads": int(sys.argv[8]), "uptime": sys.argv[9],
    "note": ("depth > 2048 is past the embedded model's training context: tok/s are valid, acceptance reflects a degraded model"
             if not sys.argv[12] else "RoPE override " + sys.argv[12] + " on the target and the draft model"),
    "cells": cells,
}
json.dump(out, open(sys.argv[2], "w"), indent=1)
print("wrote", sys.argv[2], len(cells), "cells", file=sys.stderr)
PY
