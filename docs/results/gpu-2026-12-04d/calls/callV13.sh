#!/usr/bin/env bash
# 2026-12-04d call V13 (review): the shared log_softmax and the take_acts tidy-up; the deferred-norm, fused-model and model tests with the embedded model.
source scripts/gpu-lib.sh; call_setup
gtest_shards 4 200 'DeferredNormCuda.*:ModelFusedCuda.*:FuseDecCuda.*:ModelCuda.*:GenerateCuda.*'
cd $OUT && tar cJf v13.tar.xz shard*.log && rm -f shard*.log
