#!/usr/bin/env bash
# The AVX2 trellis encoder against the reference (docs/VERIFY_KERNELS.md, 2026-12-04f), interleaved:
#   1. bench/kv_quantize_bench (quantize_head per KV type through kv_type_ops, one thread, head_dim 128, 4096 rows,
#      best of 5) with POLYKV_ISA=scalar (the reference encoder) and the CPU's own ISA, ROUNDS rounds;
#   2. prefill (pp PP) and decode (tg 64) tok/s of `polykv bench` with BEFORE (a binary built without the encoder)
#      and AFTER, q8_0/turbo3t (the default KV), on each MODEL, ROUNDS rounds of `-r 3`.
# Usage: bench/trellis_encode_ab.sh BEFORE AFTER OUT_DIR ; env: MODELS (default: the embedded model), ROUNDS (3),
#        PP (512), THREADS (2), LIB (the static library AFTER was linked from, for kv_quantize_bench).
set -euo pipefail
before=$1 after=$2 out=$3
rounds=${ROUNDS:-3} pp=${PP:-512} threads=${THREADS:-2}
lib=${LIB:-$(dirname "$after")/libpolykv_lib.a}
mkdir -p "$out"
g++ -std=c++20 -O2 -Isrc bench/kv_quantize_bench.cpp "$lib" $(pkg-config --libs libpcre2-8 icu-uc) -lpthread \
  -o /tmp/kv_quantize_bench
: > "$out/kv_quantize.txt"
for r in $(seq 1 "$rounds"); do
  for isa in scalar native; do
    echo "== round $r isa $isa load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/kv_quantize.txt"
    if [ $isa = scalar ]; then POLYKV_ISA=scalar /tmp/kv_quantize_bench; else /tmp/kv_quantize_bench; fi >> "$out/kv_quantize.txt"
  done
done
: > "$out/model.jsonl"
for m in ${MODELS:-models/polykv-code-26m-q8_0.gguf}; do
  for r in $(seq 1 "$rounds"); do
    for v in before after; do
      bin=$after; [ $v = before ] && bin=$before
      "$bin" bench -m "$m" -p "$pp" -n 64 -r 3 -t "$threads" --json 2>/dev/null | grep '^{' |
        sed "s|^{|{\"variant\":\"$v\",\"round\":$r,\"model\":\"$m\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",|" >> "$out/model.jsonl"
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, re, statistics, sys
from collections import defaultdict
out = sys.argv[1]
kq = defaultdict(list)
isa = None
for line in open(f"{out}/kv_quantize.txt"):
    m = re.match(r"== round \d+ isa (\w+)", line)
    if m: isa = m.group(1); continue
    m = re.match(r"(\S+)\s+([0-9.]+) us per row", line)
    if m and m.group(1).endswith("t"): kq[(m.group(1), isa)].append(float(m.group(2)))
rows = ["| KV type | reference (POLYKV_ISA=scalar), us/row | AVX2 encoder, us/row | ratio of medians |", "|---|---|---|---|"]
for t in ("turbo2t", "turbo3t", "turbo4t"):
    a, b = kq[(t, "scalar")], kq[(t, "native")]
    rows.append(f"| {t} | {min(a):.3f}-{max(a):.3f} | {min(b):.3f}-{max(b):.3f} | {statistics.median(a)/statistics.median(b):.2f}x |")
pm = defaultdict(list)
for line in open(f"{out}/model.jsonl"):
    j = json.loads(line)
    pm[(j["model"], j["variant"], "pp")] += j["prefill_tok_s_reps"][1:]  # the first repetition warms up
    pm[(j["model"], j["variant"], "tg")] += j["decode_tok_s_reps"][1:]
rows += ["", "| model | test | before (reps 2-3 of each run) | after | ratio of medians | far ends |", "|---|---|---|---|---|---|"]
for m in sorted({k[0] for k in pm}):
    for test in ("pp", "tg"):
        a, b = pm[(m, "before", test)], pm[(m, "after", test)]
        rows.append(f"| {m.split('/')[-1]} | {test} | {min(a):.1f}-{max(a):.1f} | {min(b):.1f}-{max(b):.1f} | "
                    f"{statistics.median(b)/statistics.median(a):.2f}x | {min(b)/max(a):.2f}-{max(b)/min(a):.2f} |")
open(f"{out}/summary.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
