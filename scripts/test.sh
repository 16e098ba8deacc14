#!/usr/bin/env bash
# The whole test suite: unit, golden (../shared/fixtures) and CLI tests through ctest, then
# coverage-guided fuzz runs of the parsers (libFuzzer, clang-14): seed 1 and 200000 inputs per target
# (POLYKV_FUZZ_RUNS); explore longer with `scripts/fuzz.sh SECONDS`. Then the ARM64 stage: a cross
# build whose kernel and golden tests run under qemu-user (scripts/arm64-test.sh), when the cross
# toolchain is installed (scripts/install-deps.sh installs it); POLYKV_REQUIRE_ARM64=1 (.ci/run) makes
# its absence a failure instead of a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
POLYKV_FUZZ_RUNS="${POLYKV_FUZZ_RUNS:-200000}" scripts/fuzz.sh
if missing=$(scripts/arm64-test.sh --check); then
  scripts/arm64-test.sh
elif [[ ${POLYKV_REQUIRE_ARM64:-0} == 1 ]]; then
  echo "ARM64 stage: $missing (scripts/install-deps.sh installs it)" >&2
  exit 1
else
  echo "ARM64 stage skipped: $missing (scripts/install-deps.sh installs it)"
fi
