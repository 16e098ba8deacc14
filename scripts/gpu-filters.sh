#!/usr/bin/env bash
# Runs ON the GPU machine (build-gpu/ carried, see scripts/gpu-build.sh): gtest filters, each under an
# optional environment, one after another within a time budget; a log per run under $OUT and a summary
# (counts and failed tests per run) on stdout and in $OUT/summary.txt.
#   scripts/gpu-filters.sh 'NAME|ENV1=a ENV2=b|FILTER|TIMEOUT_S' ...
# NAME names the log ($OUT/NAME.log); ENV may be empty; TIMEOUT_S defaults to 240. Disabled tests run
# when the filter names them (--gtest_also_run_disabled_tests is always passed).
# Environment: POLYKV_GPU_BUDGET_S (default 540), BIN (default build-gpu).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET=${POLYKV_GPU_BUDGET_S:-540}
BIN=${BIN:-build-gpu}
SUMMARY=$OUT/summary.txt
T0=$SECONDS
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
setup_gpu_libraries
for spec in "$@"; do
  IFS='|' read -r name envs filter max <<<"$spec"
  note "---- $name: ${envs:-(default env)} --gtest_filter='$filter'"
  # shellcheck disable=SC2086
  stage "$name" "${max:-240}" "$OUT/$name.log" env $envs $BIN/polykv_tests --gtest_filter="$filter" \
    --gtest_also_run_disabled_tests --gtest_color=no
  grep -E '^\[==========\] .* ran|^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]' "$OUT/$name.log" | sed 's/^/     /' | tee -a "$SUMMARY"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$OUT/$name.log" | sed 's/ (.*//' | sort -u | sed 's/^/     /' | tee -a "$SUMMARY"
done
exit $failed
