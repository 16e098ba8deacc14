#!/usr/bin/env bash
# The whole test suite: unit, golden (../shared/fixtures) and CLI tests through ctest, then
# coverage-guided fuzz runs of the parsers (libFuzzer, clang-14): seed 1 and 200000 inputs per target
# (POLYKV_FUZZ_RUNS); explore longer with `scripts/fuzz.sh SECONDS`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
POLYKV_FUZZ_RUNS="${POLYKV_FUZZ_RUNS:-200000}" scripts/fuzz.sh
