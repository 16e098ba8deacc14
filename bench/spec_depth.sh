#!/usr/bin/env bash
# Why speculation gains little at depth (issue #10, "1.8x on code at depth 4096"): acceptance and
# tokens per verify step against depth, and the model's own quality against position.
#  1. For each depth in DEPTHS and drafter in DRAFTERS: one `polykv bench --spec` cell (greedy, fixed
#     policy, n-max NMAX, 1 repetition: acceptance and tokens per step are deterministic for greedy
#     decoding, so one repetition gives them exactly; the tok/s of a single repetition are not used).
#  2. Perplexity of the held-out rows by position: rows of 4096 tokens (positions 2048..4095 are past
#     the embedded model's 2048-token training context) against the same tokens in rows of 2048; the
#     difference on the second halves is what the positions past training cost the model.
# Environment: BIN MODEL MTP TEXT(code|prose|shell) DEPTHS DRAFTERS NMAX NPROMPT NGEN THREADS ROWS OUT.
# One JSON object to OUT (default docs/results/spec-2026-12-01f/spec_depth.json).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/polykv}
MODEL=${MODEL:-models/polykv-code-26m-q8_0.gguf}
MTP=${MTP:-models/polykv-code-26m-mtp-head-q8_0.gguf}
TEXT=${TEXT:-code}
DEPTHS=${DEPTHS:-0 1024 1536 1792 2048 2304 2560 3072 4096}
DRAFTERS=${DRAFTERS:-ngram mtp}
NMAX=${NMAX:-3}
NPROMPT=${NPROMPT:-256}
NGEN=${NGEN:-128}
THREADS=${THREADS:-2}
ROWS=${ROWS:-4}  # rows of 4096 tokens for the perplexity part (0: skip it)
OUT=${OUT:-docs/results/spec-2026-12-01f/spec_depth.json}
FIXTURES=${POLYKV_FIXTURES:-../shared/fixtures}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
/usr/bin/python3 bench/spec_corpora.py "$FIXTURES/models/trained" "$WORK" 2>/dev/null
mkdir -p "$(dirname "$OUT")"
: >"$WORK/cells.jsonl"
for depth in $DEPTHS; do
  for drafter in $DRAFTERS; do
    extra=()
    [[ $drafter == mtp ]] && extra=(--model-mtp "$MTP")
    echo "== $drafter depth $depth" >&2
    "$BIN" bench -m "$MODEL" --spec "$drafter" --spec-n-max "$NMAX" --spec-policy fixed "${extra[@]}" \
      --text "$WORK/$TEXT.txt" -d "$depth" -p "$NPROMPT" -n "$NGEN" -r 1 -t "$THREADS" --json >"$WORK/cell.json"
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(json.dumps({k: j[k] for k in ("spec","depth","n_prompt","spec_n_max","drafted","accepted","acceptance_rate","tokens_per_step","steps","lossless","output_ids")}))' \
      "$WORK/cell.json" | tee -a "$WORK/cells.jsonl" >&2
  done
done
if [[ $ROWS -gt 0 ]]; then
  IDS="$FIXTURES/models/trained/ppl_dev_ids.i32"
  "$BIN" eval ppl -m "$MODEL" --ids "$IDS" -c 4096 --rows "$ROWS" -t "$THREADS" --json >"$WORK/ppl4096.json" 2>"$WORK/ppl4096.err"
  "$BIN" eval ppl -m "$MODEL" --ids "$IDS" -c 2048 --rows $((2 * ROWS)) -t "$THREADS" --json >"$WORK/ppl2048.json" 2>"$WORK/ppl2048.err"
fi
python3 - "$WORK" "$OUT" "$MODEL" "$TEXT" "$NMAX" "$NPROMPT" "$NGEN" "$ROWS" <<'EOF'
import json, re, subprocess, sys, datetime
work, out, model, text, nmax, nprompt, ngen, rows = sys.argv[1:9]
cells = [json.loads(l) for l in open(work + "/cells.jsonl")]
res = {"what": "acceptance and tokens per verify step against depth (greedy, fixed policy, 1 repetition: deterministic); "
               "perplexity of positions past the training context",
       "date": datetime.datetime.utcnow().isoformat() + "Z",
       "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "model": model, "text": text, "spec_n_max": int(nmax), "n_prompt": int(nprompt), "n_gen": int(ngen),
       "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), "cells": cells}
if int(rows) > 0:
    row = lambda f: [float(m.group(1)) for m in re.finditer(r"\[row \d+/\d+\] nll ([0-9.]+)", open(f).read())]
    r4, r2 = row(work + "/ppl4096.err"), row(work + "/ppl2048.err")
    # Row i of 4096 scores positions 0..4094 (4095 predictions); its first half equals row 2i of 2048
    # (2047 predictions, the same causal prefix), so its second half (2048 predictions of positions
    # 2048..4095) has NLL 4095*r4[i] - 2047*r2[2i]. The same tokens in their own row of 2048: r2[2i+1].
    halves = []
    for i, v in enumerate(r4):
        second = (4095 * v - 2047 * r2[2 * i]) / 2048
        halves.append({"row": i, "nll_first_half": r2[2 * i], "nll_second_half_at_2048_4095": second,
                       "nll_same_tokens_at_0_2047": r2[2 * i + 1]})
    res["ppl_by_position"] = {"rows_4096": r4, "rows_2048": r2, "halves": halves,
                              "note": "nll in nats per token; second half of a 4096 row (positions past the 2048 training context) vs the same tokens as their own 2048 row"}
json.dump(res, open(out, "w"), indent=1)
print("depth  drafter  acceptance  tok/step", file=sys.stderr)
for c in cells:
    print("%5d  %-6s  %5.1f%%  %.2f" % (c["depth"], c["spec"], 100 * c["acceptance_rate"], c["tokens_per_step"]), file=sys.stderr)
for h in res.get("ppl_by_position", {}).get("halves", []):
    print("row %d: nll positions 2048..4095 %.3f vs the same tokens at 0..2047 %.3f" %
          (h["row"], h["nll_second_half_at_2048_4095"], h["nll_same_tokens_at_0_2047"]), file=sys.stderr)
EOF
echo "wrote $OUT" >&2
