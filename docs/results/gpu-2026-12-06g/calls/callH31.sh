#!/usr/bin/env bash
# Call H31 (2026-12-06g): the MoE GPU tests of main + the H27 patch + the one-wave rule for routing inside the
# gate+up launch (MoeV2Cuda's three arms: routing kernel + five kernels, fused routing inside, fused routing first).
source scripts/gpu-lib.sh; call_setup
timeout 70 $T --gtest_filter='*MoeV2Cuda*:*MoeModelCuda*:*GptOssCuda*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests.log | head -20 >> $SUMMARY
