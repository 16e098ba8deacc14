#!/usr/bin/env bash
# 2026-12-05 call Y4 (the command given to `run`, kept here): the two tests Y3's shards did not reach before their
# 150 s timeout (Y3's filter took the slow CudaAttention* suites): HybridAttentionCuda.* and TernaryCuda.*.
source scripts/gpu-lib.sh; SUMMARY=$OUT/summary.txt; call_setup
timeout 200 $T --gtest_filter='HybridAttentionCuda.*:TernaryCuda.*' 2>&1 | tee $OUT/y4.log | grep -E "worst|tq|OK|FAILED|PASSED|Failure|Expected|actual"
