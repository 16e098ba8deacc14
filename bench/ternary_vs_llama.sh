#!/usr/bin/env bash
# Ternary models end to end, polykv against llama.cpp's llama-bench on the same synth llama-3.2-1b files (tq1_0,
# tq2_0: the types upstream llama.cpp has), the same threads, f16 KV on both, the engines alternated ROUNDS times
# (3 repetitions each, pp64 / tg32, each with its untimed warm-up). One JSON line per run to OUT.jsonl, medians
# printed.
#   bench/ternary_vs_llama.sh POLYKV LLAMA_BENCH OUT.jsonl   (env: TYPES "tq1_0 tq2_0", ROUNDS 3, THREADS 2,
#   WORK /tmp/tmodels, FA: llama-bench's -fa, 0)
set -euo pipefail
cd "$(dirname "$0")/.."
polykv=$1 llama=$2 out=$3
TYPES=${TYPES:-"tq1_0 tq2_0"} ROUNDS=${ROUNDS:-3} THREADS=${THREADS:-2} WORK=${WORK:-/tmp/tmodels} FA=${FA:-0}
mkdir -p "$WORK" "$(dirname "$out")"
: >"$out"
for t in $TYPES; do
  [ -f "$WORK/llama1b-$t.gguf" ] || "$polykv" synth --shape llama-3.2-1b --type "$t" -o "$WORK/llama1b-$t.gguf" >/dev/null
done
commit="$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)"
llama_commit="$(git -C "$(dirname "$llama")/../.." rev-parse --short HEAD 2>/dev/null || echo unknown)"
for ((r = 0; r < ROUNDS; ++r)); do
  for t in $TYPES; do
    f="$WORK/llama1b-$t.gguf"
    lj=$("$llama" -m "$f" -p 64 -n 32 -t "$THREADS" -r 3 -fa "$FA" -o json 2>/dev/null)
    pj=$("$polykv" bench -m "$f" -p 64 -n 32 -r 3 -t "$THREADS" --cache-type-k f16 --cache-type-v f16 --json 2>/dev/null)
    /usr/bin/python3 - "$lj" "$pj" "$r" "$t" "$commit" "$llama_commit" "$(uptime)" >>"$out" <<'PY'
import json, sys
lj, pj = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ll = {("prefill" if x["n_prompt"] else "decode"): x["samples_ts"] for x in lj}
print(json.dumps({"round": int(sys.argv[3]), "type": sys.argv[4], "polykv_commit": sys.argv[5], "llama_commit": sys.argv[6],
                  "uptime": sys.argv[7], "llama_tok_s": ll,
                  "polykv_tok_s": {"prefill": pj["prefill_tok_s_reps"], "decode": pj["decode_tok_s_reps"]},
                  "polykv_decode_floor_tok_s": pj.get("decode_floor_tok_s"), "llama_raw": lj}))
PY
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for t in dict.fromkeys(r["type"] for r in rows):
    for k in ("decode", "prefill"):
        l = [x for r in rows if r["type"] == t for x in r["llama_tok_s"][k]]
        p = [x for r in rows if r["type"] == t for x in r["polykv_tok_s"][k]]
        print(f"{t} {k}: llama.cpp {statistics.median(l):.1f} ({min(l):.1f}..{max(l):.1f})  polykv {statistics.median(p):.1f} ({min(p):.1f}..{max(p):.1f})  {statistics.median(p) / statistics.median(l):.2f}x")
PY
