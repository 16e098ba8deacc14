#!/usr/bin/env bash
# The whole test suite: unit, golden (../shared/fixtures) and CLI tests through ctest, then short
# coverage-guided fuzz runs of the parsers (libFuzzer, clang-14).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
scripts/fuzz.sh "${POLYKV_FUZZ_SECONDS:-20}"
