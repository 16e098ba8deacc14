#!/usr/bin/env bash
# Runs ON the GPU machine, from the repo root, with build-gpu/ (scripts/gpu-build.sh) carried:
#   1. nvidia-smi;
#   2. the GPU correctness tests: polykv_tests --gtest_filter='*Cuda*:*GPU*';
#   3. the benchmarks: the device-to-device copy bandwidth first (CudaBench.DISABLED_CopyBandwidth),
#      then every other DISABLED_ test of the GPU suites whose name has "Bench";
#   4. if this polykv has --device: synth llama-3.1-8b in q4_0 here and `polykv bench --device cuda
#      --json` on it for each KV type pair and depth, against the measured copy bandwidth.
# Everything goes under $OUT (default ./gpu-out), at most 8 files:
#   summary.txt  nvidia-smi.txt  tests.log  tests.json  bench-tests.log  polykv.log  polykv-bench.jsonl
# Fast to fail (missing build, unresolved libraries, glibc too old, no GPU) and bounded: every stage
# runs under `timeout`, and stages are skipped once the whole run nears POLYKV_GPU_BUDGET_S (default
# 510 s), so one device call of 10 minutes always returns with its logs.
# Environment: POLYKV_BENCH_DEPTHS ("0 4096 32768"), POLYKV_BENCH_KV ("f16/f16 q8_0/turbo3t"),
# POLYKV_BENCH_ARGS ("-p 512 -n 128"), POLYKV_GPU_MODEL (/tmp/llama-3.1-8b-q4_0.gguf; reused if present).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET=${POLYKV_GPU_BUDGET_S:-510}
DEPTHS=${POLYKV_BENCH_DEPTHS:-"0 4096 32768"}
KV_PAIRS=${POLYKV_BENCH_KV:-"f16/f16 q8_0/turbo3t"}
BENCH_ARGS=${POLYKV_BENCH_ARGS:-"-p 512 -n 128"}
MODEL=${POLYKV_GPU_MODEL:-/tmp/llama-3.1-8b-q4_0.gguf}
BIN=${POLYKV_GPU_BIN:-build-gpu}  # the carried folder (another one for testing this script)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
T0=$SECONDS
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh  # note, die, left, stage (STAGE_MIN_S 20, STAGE_WIDTH 44), setup_gpu_libraries

# ---- fast checks -------------------------------------------------------------------------------
setup_gpu_libraries
need=$(objdump -T $BIN/polykv $BIN/polykv_tests 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
have=$(ldd --version | head -1 | grep -o '[0-9]*\.[0-9]*$')
note "host: $(uname -m), glibc $have (binaries need ${need#GLIBC_}), $(nproc) cores"
$BIN/polykv_tests --gtest_list_tests >/dev/null 2>"$OUT/tests.log" || die "polykv_tests does not start: $(head -c 600 "$OUT/tests.log")"
timeout 30 nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || die "nvidia-smi failed: $(head -c 600 "$OUT/nvidia-smi.txt")"
timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader \
  >>"$SUMMARY" 2>&1

# ---- tests ---------------------------------------------------------------------------------------
stage "GPU tests (*Cuda*:*GPU*)" 240 "$OUT/tests.log" \
  $BIN/polykv_tests --gtest_filter='*Cuda*:*GPU*' --gtest_output="json:$OUT/tests.json" --gtest_color=no
# Counts, then the failed tests by name (a skipped GPU test here means the GPU was not seen).
grep -E '^\[==========\] .* ran|^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]' "$OUT/tests.log" | sed 's/^/     /' >>"$SUMMARY"
grep -E '^\[  FAILED  \] [A-Za-z]' "$OUT/tests.log" | sed 's/ (.*//' | sort -u | sed 's/^/     /' | tee -a "$SUMMARY"

# ---- benchmarks ------------------------------------------------------------------------------------
bw=""
if stage "copy bandwidth (4 GiB, median of 10)" 90 "$OUT/bench-tests.log" \
  $BIN/polykv_tests --gtest_filter='CudaBench.DISABLED_CopyBandwidth' --gtest_also_run_disabled_tests --gtest_color=no; then
  bw=$(grep -o 'POLYKV_COPY_BW_GBS=[0-9.]*' "$OUT/bench-tests.log" | tail -1 | cut -d= -f2)
  note "     copy bandwidth: ${bw:-?} GB/s (bytes read + written)"
fi
stage "GPU benchmark tests (*Bench*)" 180 "$OUT/bench-tests.log" \
  $BIN/polykv_tests --gtest_filter='*Cuda*Bench*:*Bench*Cuda*:*GPU*Bench*:*Bench*GPU*:CudaAttention.DISABLED_*-CudaBench.DISABLED_CopyBandwidth' \
  --gtest_also_run_disabled_tests --gtest_color=no

# ---- polykv bench on a synthetic llama-3.1-8b q4_0 -------------------------------------------------------
if ! { $BIN/polykv run --help 2>&1 | grep -q -- --device && $BIN/polykv bench --help 2>&1 | grep -q -- --device; }; then
  note "SKIP polykv bench: this polykv has no --device option yet"
else
  if [[ ! -s $MODEL ]]; then
    stage "synth llama-3.1-8b q4_0" 240 "$OUT/polykv.log" \
      $BIN/polykv synth --shape llama-3.1-8b --type q4_0 -o "$MODEL" --threads "$(nproc)" || rm -f "$MODEL"
  fi
  if [[ -s $MODEL ]]; then
    part=$(mktemp)
    for kv in $KV_PAIRS; do
      for d in $DEPTHS; do
        # stdout (one JSON object per run) to $part, stderr to polykv.log.
        # shellcheck disable=SC2086,SC2016  # BENCH_ARGS is a list of arguments; $@ and $0 are bash -c's
        stage "bench ${kv} depth $d" 150 "$OUT/polykv.log" bash -c '"$@" >"$0"' "$part" \
          $BIN/polykv bench -m "$MODEL" --device cuda $BENCH_ARGS -d "$d" -ctk "${kv%/*}" -ctv "${kv#*/}" --json \
          ${bw:+--bandwidth "$bw"} &&
          grep '^{' "$part" >>"$OUT/polykv-bench.jsonl"
      done
    done
    rm -f "$part"
    [[ -s $OUT/polykv-bench.jsonl ]] && sed 's/^/     /' "$OUT/polykv-bench.jsonl" >>"$SUMMARY"
  fi
fi

note "done in $((SECONDS - T0)) s; $( ((failed)) && echo "SOMETHING FAILED: see the logs" || echo "all stages passed")"
exit $failed
