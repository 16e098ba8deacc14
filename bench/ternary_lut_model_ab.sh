#!/usr/bin/env bash
# The ternary LUT path (backend/cpu/ternary_lut.h) against the row kernels, end to end: `polykv bench` on synth
# llama-3.2-1b files of each ternary type, POLYKV_TQ_LUT=0 and the default alternated ROUNDS times (3 repetitions
# each, pp64 / tg32, 2 threads). Writes one JSON line per run to OUT.jsonl and prints the medians.
#   bench/ternary_lut_model_ab.sh BUILD/polykv OUT.jsonl   (env: TYPES "tq1_0 ptq1_0 tq2_0", ROUNDS 3, WORK /tmp/tmodels)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1 out=$2
TYPES=${TYPES:-"tq1_0 ptq1_0 tq2_0"} ROUNDS=${ROUNDS:-3} WORK=${WORK:-/tmp/tmodels}
mkdir -p "$WORK" "$(dirname "$out")"
: >"$out"
for t in $TYPES; do
  [ -f "$WORK/llama1b-$t.gguf" ] || "$bin" synth --shape llama-3.2-1b --type "$t" -o "$WORK/llama1b-$t.gguf" >/dev/null
done
commit="$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
for ((r = 0; r < ROUNDS; ++r)); do
  for lut in 0 1; do
    for t in $TYPES; do
      json=$(POLYKV_TQ_LUT=$lut "$bin" bench -m "$WORK/llama1b-$t.gguf" -p 64 -n 32 -r 3 -t 2 --json 2>/dev/null)
      /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(json.dumps({"round": int(sys.argv[2]), "lut": int(sys.argv[3]), "type": sys.argv[4], "commit": sys.argv[5], "cpu": sys.argv[6], "uptime": sys.argv[7], "bench": d}))' \
        "$json" "$r" "$lut" "$t" "$commit" "$cpu" "$(uptime)" >>"$out"
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for t in dict.fromkeys(r["type"] for r in rows):
    for key in ("decode_tok_s", "prefill_tok_s"):
        v = {lut: [x for r in rows if r["type"] == t and r["lut"] == lut for x in r["bench"][key + "_reps"]] for lut in (0, 1)}
        m0, m1 = statistics.median(v[0]), statistics.median(v[1])
        print(f"{t} {key}: row kernels {m0:.1f} ({min(v[0]):.1f}..{max(v[0]):.1f})  LUT {m1:.1f} ({min(v[1]):.1f}..{max(v[1]):.1f})  {m1 / m0:.2f}x")
PY
