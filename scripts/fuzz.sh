#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (ASan + UBSan) and fuzzes each one.
# A crash, leak, timeout or sanitizer report fails the script and prints the report; the input that
# caused it stays in build-fuzz/ (crash-*, leak-*, timeout-*) to be turned into a regression test.
#
#   scripts/fuzz.sh [SECONDS]   explore: random seed, SECONDS per target (default 20)
#   POLYKV_FUZZ_RUNS=N scripts/fuzz.sh
#                               bounded: seed 1, N inputs per target, starting from the checked-in
#                               seeds only (the test suite uses this). libFuzzer is not bit-for-bit
#                               deterministic even so (1669 vs 1693 new units in two runs of 200000),
#                               but the search starts the same way every time.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
# The parsers under fuzz never reach the kernels, the model or eval: leaving those folders out of this
# ASan library (POLYKV_LIB_EXCLUDE) saves ~2/3 of its compile time and links the same objects.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  -DPOLYKV_FUZZ=ON -DPOLYKV_TESTS=OFF "-DPOLYKV_LIB_EXCLUDE=backend|model|eval" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_targets
if [ -n "${POLYKV_FUZZ_RUNS:-}" ]; then
  budget=(-seed=1 -runs="$POLYKV_FUZZ_RUNS")
else
  budget=(-max_total_time="$seconds")
fi
# The targets run inside build-fuzz/ (crash files land there); fixture paths must not depend on it.
export POLYKV_FIXTURES="${POLYKV_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
# Without the fixtures, a target whose source reads $POLYKV_FIXTURES is skipped with a note, or fails
# the script where they are required (POLYKV_REQUIRE_FIXTURES set and not 0, or else CI=true), as in
# the tests (tests/test_util.h).
fixtures_required() {
  if [ -n "${POLYKV_REQUIRE_FIXTURES+x}" ]; then [ "$POLYKV_REQUIRE_FIXTURES" != 0 ]; else [ "${CI:-}" = true ]; fi
}
skipped=""
for target in build-fuzz/fuzz_*; do
  [ -x "$target" ] || continue
  name=$(basename "$target")
  if [ ! -d "$POLYKV_FIXTURES" ] && grep -q POLYKV_FIXTURES "fuzz/${name#fuzz_}_fuzz_target.cpp" 2>/dev/null; then
    if fixtures_required; then
      echo "FAIL: $name needs the fixtures, not found at $POLYKV_FIXTURES (POLYKV_REQUIRE_FIXTURES or CI=true is set)"
      exit 1
    fi
    echo "skipping $name: it needs the fixtures, not found at $POLYKV_FIXTURES (set POLYKV_FIXTURES)"
    skipped="$skipped $name"
    continue
  fi
  # A bounded run starts from the checked-in seeds only, not from what earlier runs found.
  if [ -n "${POLYKV_FUZZ_RUNS:-}" ]; then
    corpus="build-fuzz/corpus-$name-bounded"
    rm -rf "$corpus"
  else
    corpus="build-fuzz/corpus-$name"
  fi
  mkdir -p "$corpus"
  seeds="fuzz/seeds/${name#fuzz_}"
  log="build-fuzz/$name.log"
  echo "fuzzing $name (${budget[*]})"
  status=0
  (cd build-fuzz && "../$target" "${budget[@]}" -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
    "../$corpus" $( [ -d "$seeds" ] && echo "../$seeds" )) >"$log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    echo "FAIL: $name exited with $status; its report:"
    grep -v -E '^#[0-9]+\s' "$log" | tail -n 80
    exit 1
  fi
  tail -n 4 "$log"
done
echo "fuzz: all targets ran without a crash${skipped:+ (skipped without the fixtures:$skipped)}"
