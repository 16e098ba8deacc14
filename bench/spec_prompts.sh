#!/usr/bin/env bash
# Speculation over several prompts at one depth (issue #10): bench/spec_sweep.sh measures one prompt per text
# and depth (the text's tokens [depth, depth + NPROMPT)), and a greedy continuation can be a near tie at its
# first token (docs/SPECULATIVE.md 2026-12-04: at depth 4096 the CPU's q8_0/turbo3t KV and f16 KV pick
# different first tokens, and the two continuations repeat their context very differently). Here the code text
# is cut at NOFF starting points (OFFSET_CHARS apart, each cut at a line start), and each cut is one prompt:
# `polykv bench --spec X --spec-n-max K --text CUT -d DEPTH` per drafter and n-max, plain and speculative
# interleaved, REPS repetitions, lossless check.
# Environment: BIN (build/polykv), MODEL (embedded), DRAFTERS ("ngram mtp draft"), NMAX ("3 8"), DEPTH (4096),
#   ROPE ("--rope-scaling yarn --rope-scale 4"), KV ("q8_0 turbo3t"), NOFF (6), OFFSET_CHARS (6000), REPS (3),
#   NPROMPT (256), NGEN (128), THREADS (2), OUT (docs/results/spec-2026-12-04/prompts.json).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/polykv}
MODEL=${MODEL:-models/polykv-code-26m-q8_0.gguf}
DRAFTERS=${DRAFTERS:-ngram mtp draft}
NMAX=${NMAX:-3 8}
DEPTH=${DEPTH:-4096}
ROPE=${ROPE:---rope-scaling yarn --rope-scale 4}
read -r -a ROPE_ARGS <<<"$ROPE"
read -r CTK CTV <<<"${KV:-q8_0 turbo3t}"
NOFF=${NOFF:-6}
OFFSET_CHARS=${OFFSET_CHARS:-6000}
REPS=${REPS:-3}
NPROMPT=${NPROMPT:-256}
NGEN=${NGEN:-128}
THREADS=${THREADS:-2}
OUT=${OUT:-docs/results/spec-2026-12-04/prompts.json}
FIXTURES=${POLYKV_FIXTURES:-../shared/fixtures}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
/usr/bin/python3 bench/spec_corpora.py "$FIXTURES/models/trained" "$WORK" >/dev/null 2>&1
python3 - "$WORK/code.txt" "$NOFF" "$OFFSET_CHARS" "$WORK" <<'PY'
import sys
text, n, step, work = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
for i in range(n):
    at = text.find("\n", i * step) + 1 if i else 0
    open(f"{work}/cut{i}.txt", "w").write(text[at:])
PY
CELLS="$WORK/cells.jsonl"
: >"$CELLS"
for drafter in $DRAFTERS; do
  extra=()
  [[ $drafter == draft || $drafter == ngram+draft ]] && extra=(--model-draft models/polykv-draft-q8_0.gguf)
  [[ $drafter == mtp || $drafter == ngram+mtp ]] && extra=(--model-mtp models/polykv-code-26m-mtp-head-q8_0.gguf)
  for n in $NMAX; do
    for ((i = 0; i < NOFF; ++i)); do
      if "$BIN" bench -m "$MODEL" "${ROPE_ARGS[@]}" -ctk "$CTK" -ctv "$CTV" --spec "$drafter" --spec-n-max "$n" "${extra[@]}" \
          --text "$WORK/cut$i.txt" -d "$DEPTH" -p "$NPROMPT" -n "$NGEN" -r "$REPS" -t "$THREADS" --json \
          >"$WORK/cell.json" 2>"$WORK/cell.err"; then
        python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["cut"]=int(sys.argv[2]); print(json.dumps(j))' \
          "$WORK/cell.json" "$i" >>"$CELLS"
        python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%s n-max %s cut %s: accept %.1f%%  tok/step %.2f  speedup %.2fx (%.2f..%.2f) lossless %s" % (j["spec"], j["spec_n_max"], sys.argv[2], 100*j["acceptance_rate"], j["tokens_per_step"], j["speedup_median"], j["speedup_min"], j["speedup_max"], j["lossless"]))' "$WORK/cell.json" "$i" >&2
      else
        echo "$drafter n-max $n cut $i failed: $(tail -1 "$WORK/cell.err")" >&2
      fi
    done
  done
done
python3 - "$CELLS" "$OUT" "$MODEL" "$DEPTH" "$ROPE" "$CTK/$CTV" "$REPS" "$(git rev-parse --short HEAD)" "$(uptime)" <<'PY'
import datetime, json, statistics, sys
cells = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
summary = {}
for c in cells:
    summary.setdefault(f'{c["spec"]} n-max {c["spec_n_max"]}', []).append(c["speedup_median"])
out = dict(what="speculation over several prompts at one depth (bench/spec_prompts.sh)", model=sys.argv[3],
           depth=int(sys.argv[4]), rope=sys.argv[5], kv=sys.argv[6], reps=int(sys.argv[7]), commit=sys.argv[8],
           uptime=sys.argv[9], date=datetime.datetime.utcnow().isoformat() + "Z",
           summary={k: dict(per_prompt=v, median=statistics.median(v), min=min(v), max=max(v),
                            geomean=statistics.geometric_mean(v)) for k, v in summary.items()},
           cells=cells)
json.dump(out, open(sys.argv[2], "w"), indent=1)
for k, s in out["summary"].items():
    print(f'{k}: median {s["median"]:.2f}x, geomean {s["geomean"]:.2f}x, per prompt {", ".join("%.2f" % x for x in s["per_prompt"])}', file=sys.stderr)
PY
