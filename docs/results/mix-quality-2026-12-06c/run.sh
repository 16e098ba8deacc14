#!/usr/bin/env bash
# Weight mixes against one-type files on the trained code model (../shared/fixtures/models/trained, f16, 25.9 M
# parameters): polykv quantize to each type or mix, then polykv eval ppl over the 16 held-out rows of 2048 tokens
# (ppl_dev_ids.i32; transformers' f32 perplexity 3.7409), f16 KV, so that only the weights differ. CPU.
# Usage: docs/results/mix-quality-2026-12-06c/run.sh [BUILD_DIR]   (writes ppl.jsonl beside this script)
set -euo pipefail
cd "$(dirname "$0")/../../.."
P=${1:-build}/polykv
F=${POLYKV_FIXTURES:-../shared/fixtures}/models/trained
OUT=docs/results/mix-quality-2026-12-06c
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
: > $OUT/ppl.jsonl
for t in f16 q8_0 q6_K q5_K_M q5_K q4_K_M q4_K; do
  m=$F/trained_llama.gguf
  if [ $t != f16 ]; then m=$TMP/$t.gguf; $P quantize $F/trained_llama.gguf $m $t --threads 2 >&2; fi
  types=$($P bench -m $m -p 0 -n 1 -r 1 --json 2>/dev/null | grep -oE '"weight_types":\{[^}]*\}')
  $P eval ppl -m $m --ids $F/ppl_dev_ids.i32 -c 2048 --json 2>/dev/null | tr -d '\n' |
    sed "s/^{/{\"weights\":\"$t\",\"file_bytes\":$(stat -c %s $m),$types,/" >> $OUT/ppl.jsonl
  echo >> $OUT/ppl.jsonl
done
/usr/bin/python3 - "$OUT/ppl.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = rows[0]["nll_mean"]
print("| weights | file MiB | matrix types | ppl | nll - f16's (nats) |")
print("|---|---|---|---|---|")
for r in rows:
    types = ", ".join(f"{k} {v}" for k, v in sorted(r["weight_types"].items()))
    print(f"| {r['weights']} | {r['file_bytes'] / 2**20:.2f} | {types} | {r['ppl']:.4f} | {r['nll_mean'] - base:+.4f} |")
PY
