#!/usr/bin/env bash
# Runs the kernel tests (a gtest filter) with POLYKV_ISA=ISA, so that every kernel table takes that
# ISA's path (core/isa.h); ctest runs it once per x86 ISA below the widest (CMakeLists.txt), the
# plain test run covers the widest. Exits 77 (ctest: skipped) when this CPU lacks the ISA.
# Usage: tests/run_forced_isa.sh ISA POLYKV_TESTS_BINARY GTEST_FILTER
set -euo pipefail
isa=$1 binary=$2 filter=$3
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
case $isa in
  scalar) ;;
  avx2) has avx2 fma f16c || { echo "skipped: this CPU lacks AVX2/FMA/F16C"; exit 77; } ;;
  avx512) has avx512f avx512bw avx512vl avx512dq avx512_vnni || { echo "skipped: no AVX-512 set"; exit 77; } ;;
  *) echo "unknown ISA $isa" >&2; exit 2 ;;
esac
POLYKV_ISA=$isa exec "$binary" --gtest_filter="$filter" --gtest_brief=1
