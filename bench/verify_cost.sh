#!/usr/bin/env bash
# Verify-step cost curve (issue #10, docs/VERIFY_KERNELS.md): for each weight type and depth, the
# time of one k-token all-logits step (a speculative verify step) against a one-token decode step,
# k = 1, 2, 3, 4, 8, on synth llama-3.2-1b (random weights: the cost does not depend on them).
# Repetitions are interleaved over k inside `polykv bench --verify-k`; each ratio is taken within a
# repetition, and the JSON keeps every repetition and the load average before and after.
# Usage: bench/verify_cost.sh [POLYKV] [OUT_DIR] ; env: MODELS_DIR, TYPES, DEPTHS (KV tokens filled
#        before the timed steps, e.g. DEPTHS="0 1024 4096"), THREADS, REPS, STEPS, KS, TAG (file name
#        suffix, e.g. "before"), CTK / CTV (KV types, default q8_0 / turbo3t), SYNTH_THREADS and
#        FILL_THREADS (untimed model generation and depth fill; default: all cores), MODEL (a GGUF to
#        measure instead of the synth models, e.g. models/polykv-code-26m-q8_0.gguf; TYPES is then
#        ignored and the files are named after the model), AB (e.g. AB="old new": for each type and
#        depth, one run per variant in that order, ROUNDS times; variant "old" sets POLYKV_PACKED_ZP=off
#        (the packed kernels' former paths, docs/VERIFY_KERNELS.md "2026-12-01f"), "new" the defaults;
#        the files get _old / _new (and _rN for round N > 1) after TAG), OLD_ENV (the environment of
#        variant "old", default POLYKV_PACKED_ZP=off; e.g. OLD_ENV=POLYKV_PACKED_PF=0: no weight
#        prefetch, docs/VERIFY_KERNELS.md "2026-12-02").
# The lead's quiet re-run of the 2026-12-01f figures (one command, ~3-4 minutes on a quiet machine):
#   TAG=quiet AB="old new" KS=1,2,4,8 REPS=3 STEPS=4 bench/verify_cost.sh build/polykv docs/results/verify-2026-12-01f
#   python3 bench/verify_table.py docs/results/verify-2026-12-01f
set -euo pipefail
cd "$(dirname "$0")/.."
polykv=${1:-build/polykv}
out=${2:-docs/results/verify-2026-12-01}
models=${MODELS_DIR:-/tmp/polykv-verify-models}
types=${TYPES:-"q4_0 q8_0 q4_K"}
depths=${DEPTHS:-"0 1024"}
threads=${THREADS:-2}
reps=${REPS:-5}
steps=${STEPS:-6}
ks=${KS:-1,2,3,4,8}
tag=${TAG:+_$TAG}
ctk=${CTK:-q8_0}
ctv=${CTV:-turbo3t}
mkdir -p "$models" "$out"
if [ -n "${MODEL:-}" ]; then
  types=$(basename "$MODEL" .gguf)
else
  for t in $types; do
    f="$models/llama-3.2-1b-$t.gguf"
    [ -s "$f" ] || "$polykv" synth --shape llama-3.2-1b --type "$t" -o "$f" --threads "${SYNTH_THREADS:-$(nproc)}"
  done
fi
variants=${AB:-default}
rounds=${ROUNDS:-1}
for t in $types; do
  gguf=${MODEL:-$models/llama-3.2-1b-$t.gguf}
  for d in $depths; do
  for round in $(seq 1 "$rounds"); do
  for v in $variants; do
    suffix=""
    [ "$v" = default ] || suffix="_$v"
    [ "$round" = 1 ] || suffix="${suffix}_r$round"
    j="$out/verify_${t}_d${d}_t${threads}${tag}${suffix}.json"
    env=()
    [ "$v" = old ] && env=(${OLD_ENV:-POLYKV_PACKED_ZP=off})
    echo "== $t depth $d threads $threads $v ($(uptime | sed 's/.*load/load/'))" >&2
    env "${env[@]}" "$polykv" bench -m "$gguf" -t "$threads" -d "$d" --verify-k "$ks" -r "$reps" \
      --verify-steps "$steps" -ctk "$ctk" -ctv "$ctv" --fill-threads "${FILL_THREADS:-0}" --json 2>/dev/null > "$j.tmp"
    python3 - "$j.tmp" "$(uptime)" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" > "$j" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["uptime"] = sys.argv[2].strip()
r["commit"] = sys.argv[3]
print(json.dumps(r, indent=1))
EOF
    rm -f "$j.tmp"
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("| %s | %d | " % (r["weight_type"], r["depth"]) + " | ".join(
    "k=%d %.2fx (%.2f..%.2f) %.1f ms, cpu %.2fx" % (v["k"], v["ratio"], v["ratio_min"], v["ratio_max"], v["step_ms"], v["cpu_ratio"])
    for v in r["verify"]) + " | load %.1f |" % r["load_avg_1m_before"])' "$j"
  done
  done
  done
done
