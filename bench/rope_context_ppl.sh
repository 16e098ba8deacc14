#!/usr/bin/env bash
# Perplexity of the held-out code past the embedded model's 2048-token training context, with and without
# RoPE overrides (README "Past the training context"; docs/SPECULATIVE.md 2026-12-04). One `polykv eval ppl`
# per setting, f16 KV (eval's reference types), the whole ppl_dev text in rows of -c tokens.
#   BIN (build/polykv)  MODEL (the embedded model)  OUT (docs/results/spec-2026-12-04/rope_ppl.json)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/polykv}
MODEL=${MODEL:-models/polykv-code-26m-q8_0.gguf}
OUT=${OUT:-docs/results/spec-2026-12-04/rope_ppl.json}
TEXT=${POLYKV_FIXTURES:-../shared/fixtures}/models/trained/ppl_dev.txt
SETTINGS=(
  "-c 2048"
  "-c 4096"
  "-c 4096 --rope-scaling linear --rope-scale 2"
  "-c 4096 --rope-freq-base 40000"
  "-c 4096 --rope-scaling yarn --rope-scale 2"
  "-c 4096 --rope-scaling yarn --rope-scale 3"
  "-c 4096 --rope-scaling yarn --rope-scale 4"
  "-c 8192 --rope-scaling yarn --rope-scale 4"
  "-c 8192 --rope-scaling yarn --rope-scale 8"
  "-c 16384 --rope-scaling yarn --rope-scale 8"
  "-c 16384 --rope-scaling yarn --rope-scale 10"
  "-c 16384 --rope-scaling yarn --rope-scale 16"
)
mkdir -p "$(dirname "$OUT")"
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for s in "${SETTINGS[@]}"; do
  read -r -a args <<<"$s"
  ppl=$("$BIN" eval ppl -m "$MODEL" -f "$TEXT" "${args[@]}" 2>/dev/null | awk '$1 == "perplexity" {print $2}')
  echo "$s: $ppl" >&2
  printf '%s\t%s\n' "$s" "$ppl" >>"$rows"
done
python3 - "$rows" "$OUT" "$MODEL" "$(git rev-parse --short HEAD)" <<'PY'
import datetime, json, sys
rows = [dict(args=a, perplexity=float(p)) for a, p in (l.rstrip("\n").split("\t") for l in open(sys.argv[1]))]
json.dump(dict(what="eval ppl of the held-out code (ppl_dev.txt) past the 2048-token training context, f16 KV",
               model=sys.argv[3], commit=sys.argv[4], date=datetime.datetime.utcnow().isoformat() + "Z", rows=rows),
          open(sys.argv[2], "w"), indent=1)
print("wrote", sys.argv[2], file=sys.stderr)
PY
