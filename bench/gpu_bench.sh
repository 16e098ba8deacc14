#!/usr/bin/env bash
# The GPU figures of docs/PERFORMANCE.md ("CUDA backend on an H200"). Runs ON the GPU machine from the
# repository root with build-gpu/ (scripts/gpu-build.sh) beside it; writes JSON lines and logs to $OUT:
#   bench.jsonl    one `polykv bench --json` object per run (every repetition in *_reps)
#   agents.jsonl   `polykv bench-agents --json` lines (many agents on one shared context)
#   bench.log      stderr of every run
# Models are synthesized there (`polykv synth`, random weights shaped like llama-3.1-8b): too large to
# carry. Stages run in order of importance, each under `timeout`, and stop when the budget
# (GPU_BENCH_BUDGET_S, default 420 s) is spent, so one device call always returns its files.
# Environment: GPU_BENCH_BW (copy bandwidth in GB/s for the floor; measured by the caller),
#              GPU_BENCH_STAGES (default "depth0 q8_0 depth32k agents graphs").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=${GPU_BENCH_BIN:-build-gpu}
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BUDGET=${GPU_BENCH_BUDGET_S:-420}
BW=${GPU_BENCH_BW:-}
STAGES=${GPU_BENCH_STAGES:-"depth0 q8_0 depth32k agents graphs"}
T0=$SECONDS
left() { echo $((BUDGET - (SECONDS - T0))); }

# run MAX_S OUTFILE CMD...: CMD's stdout (JSON lines) appended to OUTFILE, stderr to bench.log.
run() {
  local max=$1 out=$2
  shift 2
  local l
  l=$(left)
  ((l < 15)) && { echo "SKIP (budget): $*" | tee -a "$OUT/bench.log"; return 1; }
  ((max > l)) && max=$l
  echo "==== $* (timeout ${max}s)" >>"$OUT/bench.log"
  local t=$SECONDS
  timeout -k 5 "$max" "$@" >>"$out" 2>>"$OUT/bench.log"
  local rc=$?
  echo "rc=$rc $((SECONDS - t))s: $*" | tee -a "$OUT/bench.log"
  return $rc
}

model() {  # model TYPE -> path (synthesized once)
  local m=/tmp/llama-3.1-8b-$1.gguf
  [[ -s $m ]] || run 200 /dev/null "$BIN/polykv" synth --shape llama-3.1-8b --type "$1" -o "$m" --threads "$(nproc)" >&2 || rm -f "$m"
  echo "$m"
}

bench() {  # bench MODEL DEPTH K/V EXTRA...
  local m=$1 d=$2 kv=$3
  shift 3
  run 150 "$OUT/bench.jsonl" "$BIN/polykv" bench -m "$m" --device cuda -d "$d" -ctk "${kv%/*}" -ctv "${kv#*/}" \
    --json ${BW:+--bandwidth "$BW"} "$@"
}

for stage in $STAGES; do
  case $stage in
    depth0)  # every KV pair at depth 0: decode against the floor, prefill at pp512 and pp4096
      m=$(model q4_0)
      for kv in f16/f16 q8_0/q8_0 q8_0/turbo3t q8_0/turbo3 turbo3t/turbo3t; do
        bench "$m" 0 "$kv" -p 512 -n 128 -r 3
      done
      bench "$m" 0 q8_0/turbo3t -p 4096 -n 0 -r 3
      ;;
    depth32k)  # decode at 32768 (one fill per pair, 3 decode repetitions)
      m=$(model q4_0)
      for kv in f16/f16 q8_0/q8_0 q8_0/turbo3t; do
        bench "$m" 32768 "$kv" -p 0 -n 64 -r 3
      done
      ;;
    q8_0)
      m=$(model q8_0)
      bench "$m" 0 q8_0/turbo3t -p 512 -n 128 -r 3
      ;;
    agents)  # one shared 32k context: 1 and 64 agents
      m=$(model q4_0)
      run 200 "$OUT/agents.jsonl" "$BIN/polykv" bench-agents -m "$m" --device cuda --agents 1,64 --share on \
        --context 32768 --suffix 32 --gen 32 --json
      ;;
    graphs)  # decode at depth 0 with CUDA graphs on (opt-in: POLYKV_CUDA_GRAPHS=1)
      m=$(model q4_0)
      POLYKV_CUDA_GRAPHS=1 bench "$m" 0 q8_0/q8_0 -p 0 -n 128 -r 3
      ;;
  esac
done
echo "gpu_bench: done in $((SECONDS - T0)) s" | tee -a "$OUT/bench.log"
