#!/usr/bin/env bash
# 2026-12-03 call P7, the final build (one GdnRuleArgs for both delta-rule forms): the GDN, hybrid and attention GPU
# tests, and the one-layer delta-rule speed test (chunked and token by token).
source scripts/gpu-lib.sh; call_setup
gtest_shards 4 120 'GdnCuda.*:*Hybrid*:CudaAttention.HeadSizes:CudaAttention.EveryKTypeWithTheMainVTypesPrefill:*ModelCuda*:-*DISABLED*:*Emulation*'
timeout 60 $T --gtest_also_run_disabled_tests --gtest_filter='GdnCuda.DISABLED_*' > $OUT/gdn-speed.log 2>&1
grep -E '^(decode|prefill)' $OUT/gdn-speed.log >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz shard*.log gdn-speed.log && rm -f shard*.log gdn-speed.log
