#!/usr/bin/env bash
# Decode of MoE synth files with BEFORE (experts' products each split over the threads) and AFTER (decode steps:
# whole experts per thread, backend/cpu/moe_cpu.h kMoeExpertParallelRows), interleaved: ROUNDS rounds of
# `bench -p 0 -n N -r 3` per binary and file, f16 KV (as bench/moe_bench.sh), 2 threads. Prints decode tok/s
# (repetitions 2-3 of each run; the first warms up) and the ratio of the medians; JSON lines in OUT/ab.jsonl.
# Usage: bench/moe_expert_parallel_ab.sh BEFORE AFTER OUT FILE...   env: ROUNDS (3), N (64), THREADS (2),
#        BEFORE_ENV (environment of the "before" runs, e.g. POLYKV_MOE_EXPERT_PARALLEL=0 with BEFORE = AFTER: one
#        binary, the switch off).
set -euo pipefail
before=$1 after=$2 out=$3
shift 3
mkdir -p "$out"
: > "$out/ab.jsonl"
for f in "$@"; do
  for r in $(seq 1 "${ROUNDS:-3}"); do
    for v in before after; do
      bin=$after; [ $v = before ] && bin=$before
      envs=(); [ $v = before ] && [ -n "${BEFORE_ENV:-}" ] && envs=("$BEFORE_ENV")
      env "${envs[@]}" "$bin" bench -m "$f" -p 0 -n "${N:-64}" -r 3 -t "${THREADS:-2}" -ctk f16 -ctv f16 --json 2>/dev/null | grep '^{' |
        sed "s|^{|{\"variant\":\"$v\",\"round\":$r,\"file\":\"$(basename "$f")\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",|" >> "$out/ab.jsonl"
    done
  done
done
/usr/bin/python3 - "$out/ab.jsonl" <<'PY' | tee "$out/summary.md"
import json, statistics, sys
from collections import defaultdict
d = defaultdict(list)
for line in open(sys.argv[1]):
    j = json.loads(line)
    d[(j["file"], j["variant"])] += j["decode_tok_s_reps"][1:]
print("| file | before, tok/s | after, tok/s | ratio of medians | far ends |")
print("|---|---|---|---|---|")
for f in sorted({k[0] for k in d}):
    a, b = d[(f, "before")], d[(f, "after")]
    print(f"| {f} | {min(a):.2f}-{max(a):.2f} | {min(b):.2f}-{max(b):.2f} | {statistics.median(b)/statistics.median(a):.2f}x | "
          f"{min(b)/max(a):.2f}-{max(b)/min(a):.2f} |")
PY
