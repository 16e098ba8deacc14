#!/usr/bin/env bash
# perf stat task-clock (CPU time of all threads, what a loaded machine disturbs least) of verify steps,
# issue #10: per-step task-clock of `polykv bench --verify-k K` from two runs that differ only in the
# number of timed steps (model load, packing and warm-up cancel out): (tc(S2) - tc(S1)) / (REPS*(S2-S1)).
# Hardware counters (cycles, instructions) are not available in this VM (perf: <not supported>).
# Usage: bench/verify_perfstat.sh [POLYKV] [GGUF] ; env: KS (default "1 2 4"), REPS (3), S1 (1), S2 (5),
#        DEPTH (0), PASSES (2: k's alternated per pass). Prints one line per run and per k.
set -euo pipefail
cd "$(dirname "$0")/.."
polykv=${1:-build/polykv}
gguf=${2:-/tmp/polykv-verify-models/llama-3.2-1b-q4_0.gguf}
ks=${KS:-"1 2 4"}; reps=${REPS:-3}; s1=${S1:-1}; s2=${S2:-5}; depth=${DEPTH:-0}; passes=${PASSES:-2}
tc() {  # task-clock ms of one bench run with $2 steps per repetition at k = $1
  perf stat -x, -e task-clock "$polykv" bench -m "$gguf" -t 2 -d "$depth" --verify-k "$1" -r "$reps" \
    --verify-steps "$2" -ctk q8_0 -ctv turbo3t 2>&1 >/dev/null | grep task-clock | cut -d, -f1
}
echo "# $(basename "$gguf") depth $depth, $(uptime | sed 's/.*load/load/')"
for p in $(seq "$passes"); do
  for k in $ks; do
    a=$(tc "$k" "$s1"); b=$(tc "$k" "$s2")
    python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print('pass %s k=%s task-clock per step %.1f ms (runs %.0f / %.0f ms)' % (sys.argv[3], sys.argv[4], (b-a)/($reps*($s2-$s1)), a, b))" "$a" "$b" "$p" "$k"
  done
done
echo "# end: $(uptime | sed 's/.*load/load/')"
