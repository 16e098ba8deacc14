#!/usr/bin/env bash
# Decode speed of the CUDA backend (issue #9), run ON the GPU machine from the repo root with build-gpu/
# (scripts/gpu-build.sh) carried; builds nothing. In order, each stage under `timeout` and the whole
# run bounded by POLYKV_GPU_BUDGET_S (default 470 s) so one 8-minute device call returns its logs:
#   1. correctness of what the speed work changed (fast): the fused ops (OpsFusedCuda, OpsActsCuda),
#      matmul over several matrices (MatmulPartsCuda), the fused model against the plain one bit for
#      bit (ModelFusedCuda), the model against the CPU (ModelCuda);
#   2. kernel microbenchmarks: launch overhead, one decode layer's mat-vecs fused / separate (plain,
#      PDL, graph), every mat-vec shape of llama-3.1-8b with GB/s and % of copy bandwidth;
#   3. `polykv bench --device cuda -p 0 -n 128 -d 0 -r 3` on a synth llama-3.1-8b q4_0 (made here,
#      ~13 s), interleaved variants (fused = default, plain = before this work, noacts, nopdl, rows1,
#      rowsmax; see below), POLYKV_SPEED_ROUNDS rounds;
#   4. the wider GPU tests (MatmulCuda, OpsCuda, CudaBackend, EngineCuda), as far as the budget goes
#      (they took minutes before);
#   5. CUDA graphs last (opt-in; a recorded step hung once): decode with graphs, with graphs recorded
#      without PDL (POLYKV_CUDA_GRAPH_PDL=0), then ModelCudaGraphs.
# Output under $OUT (default ./gpu-out): summary.txt, nvidia-smi.txt, tests.log, tests.json,
# tests-wide.log, bench-kernels.log, polykv.log, decode.jsonl (one JSON object per bench run, with "variant").
# Environment: POLYKV_GPU_MODEL (/tmp/llama-3.1-8b-q4_0.gguf; reused if present), POLYKV_GPU_BIN
# (build-gpu), POLYKV_SPEED_TESTS=0 skips stages 1 and 4, POLYKV_SPEED_ROUNDS (2).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET=${POLYKV_GPU_BUDGET_S:-470}
MODEL=${POLYKV_GPU_MODEL:-/tmp/llama-3.1-8b-q4_0.gguf}
BIN=${POLYKV_GPU_BIN:-build-gpu}
ROUNDS=${POLYKV_SPEED_ROUNDS:-2}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
T0=$SECONDS
STAGE_MIN_S=15 STAGE_WIDTH=50
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh  # note, die, left, stage, setup_gpu_libraries

# ---- fast checks -------------------------------------------------------------------------------
setup_gpu_libraries
$BIN/polykv_tests --gtest_list_tests >/dev/null 2>"$OUT/tests.log" || die "polykv_tests does not start: $(head -c 600 "$OUT/tests.log")"
timeout 30 nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || die "nvidia-smi failed: $(head -c 600 "$OUT/nvidia-smi.txt")"
timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader \
  >>"$SUMMARY" 2>&1
note "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# ---- 1. correctness of what changed (fast) ---------------------------------------------------------
summarize_tests() {  # counts, failed tests, first failure messages
  grep -E '^\[==========\] .* ran|^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]' "$1" | tail -4 | sed 's/^/     /' >>"$SUMMARY"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$1" | sed 's/ (.*//' | sort -u | sed 's/^/     /' | tee -a "$SUMMARY"
  grep -E 'Failure|differ|off;|wrote past|unwritten' "$1" | head -8 | cut -c1-400 | sed 's/^/     /' >>"$SUMMARY"
}
if [[ ${POLYKV_SPEED_TESTS:-1} != 0 ]]; then
  stage "tests: fused ops, acts, parts, fused model, model" 90 "$OUT/tests.log" \
    $BIN/polykv_tests --gtest_filter='OpsFusedCuda.*:OpsActsCuda.*:MatmulPartsCuda.*:ModelFusedCuda.*:*ModelCuda.*' \
    --gtest_output="json:$OUT/tests.json" --gtest_color=no
  summarize_tests "$OUT/tests.log"
fi

# ---- 2. kernel microbenchmarks ---------------------------------------------------------------------
stage "bench: launch overhead, decode layer fused/separate" 60 "$OUT/bench-kernels.log" \
  $BIN/polykv_tests --gtest_filter='MatvecSpeedBench.DISABLED_*' --gtest_also_run_disabled_tests --gtest_color=no
stage "bench: mat-vec shapes, decode layer" 90 "$OUT/bench-kernels.log" \
  $BIN/polykv_tests --gtest_filter='MatmulCudaBench.DISABLED_Matvec:MatmulCudaBench.DISABLED_DecodeLayer:MatmulCudaBench.DISABLED_MatvecVariants' \
  --gtest_also_run_disabled_tests --gtest_color=no
grep -A6 '^empty kernel' "$OUT/bench-kernels.log" | grep -v '^====' | sed 's/^/     /' >>"$SUMMARY"
grep -E '^(q4_0|q8_0|q4_K) .*(graph|pdl|plain)|^device-to-device' "$OUT/bench-kernels.log" | sed 's/^/     /' >>"$SUMMARY"
bw=$(grep -o 'device-to-device copy: [0-9]*' "$OUT/bench-kernels.log" | head -1 | grep -o '[0-9]*$')

# ---- 3. polykv bench decode ------------------------------------------------------------------------
if [[ ! -s $MODEL ]]; then
  stage "synth llama-3.1-8b q4_0" 120 "$OUT/polykv.log" \
    $BIN/polykv synth --shape llama-3.1-8b --type q4_0 -o "$MODEL" --threads "$(nproc)" || rm -f "$MODEL"
fi
# decode VARIANT ROUND: one `polykv bench` run in the variant's environment, appended to decode.jsonl.
part=$(mktemp)
decode() {
  local variant=$1 round=$2 envs=()
  case $variant in
    plain) envs=(POLYKV_CUDA_FUSED=0) ;;
    noacts) envs=(POLYKV_CUDA_FUSED_ACTS=0) ;;
    acts) envs=(POLYKV_CUDA_FUSED_ACTS=1) ;;
    nopdl) envs=(POLYKV_CUDA_PDL=0) ;;
    rows1) envs=(POLYKV_MATVEC_ROWS=1) ;;
    rowsmax) envs=(POLYKV_MATVEC_ROWS=4) ;;
    graphs) envs=(POLYKV_CUDA_GRAPHS=1) ;;
    graphs-nopdl) envs=(POLYKV_CUDA_GRAPHS=1 POLYKV_CUDA_GRAPH_PDL=0) ;;
  esac
  # shellcheck disable=SC2016  # $@ and $0 are bash -c's
  if stage "decode -n 128 d0 r3: $variant (round $round)" 60 "$OUT/polykv.log" \
    env "${envs[@]}" bash -c '"$@" >"$0"' "$part" \
    $BIN/polykv bench -m "$MODEL" --device cuda -p 0 -n 128 -d 0 -r 3 --json ${bw:+--bandwidth "$bw"}; then
    grep '^{' "$part" | sed "s/^{/{\"variant\":\"$variant\",\"round\":$round,/" >>"$OUT/decode.jsonl"
    # The variant, round and bench's decode fields.
    note "     $variant round $round: $(grep -oE '"(decode)[A-Za-z_]*":(\[[^]]*\]|[^,}]*)' "$part" | tr '\n' ' ')"
  fi
}
# Variants (environment of the backend): fused = the default (fused ops, each mat-vec quantizing its
# own activations, PDL); plain = POLYKV_CUDA_FUSED=0 (the ops one by one, as before
# this work); acts = fused with the norms writing the activations (off by default); nopdl = fused without programmatic
# dependent launch; rows1 / rowsmax = fused with the mat-vec's rows per warp forced to 1 / the widest
# (POLYKV_MATVEC_ROWS); graphs = fused with CUDA graphs (opt-in: run last, after the wider tests,
# since a recorded step hung once; a hang is cut by the timeout).
if [[ -s $MODEL ]]; then
  for round in $(seq 1 "$ROUNDS"); do
    for variant in fused plain acts nopdl rows1 rowsmax; do decode $variant "$round"; done
  done
fi

# ---- 4. the wider GPU tests (mat-vec kernels, ops, backend, engine; slow: last) ----------------------
if [[ ${POLYKV_SPEED_TESTS:-1} != 0 ]]; then
  stage "tests: MatmulCuda, OpsCuda, CudaBackend, EngineCuda" 150 "$OUT/tests-wide.log" \
    $BIN/polykv_tests --gtest_filter='MatmulCuda.*:OpsCuda.*:CudaBackend*:EngineCuda.*' --gtest_color=no
  summarize_tests "$OUT/tests-wide.log"
fi

# ---- 5. CUDA graphs (opt-in: a recorded step hung once, docs/GPU.md): last, with short timeouts -------
if [[ -s $MODEL ]]; then
  decode graphs 1
  decode graphs-nopdl 1  # steps recorded without PDL
fi
if [[ ${POLYKV_SPEED_TESTS:-1} != 0 ]]; then
  stage "test: graphs replay = eager (ModelCudaGraphs)" 40 "$OUT/tests-wide.log" \
    $BIN/polykv_tests --gtest_filter='ModelCudaGraphs.*' --gtest_color=no
fi
rm -f "$part"

note "done in $((SECONDS - T0)) s; $( ((failed)) && echo "SOMETHING FAILED: see the logs" || echo "all stages passed")"
exit $failed
