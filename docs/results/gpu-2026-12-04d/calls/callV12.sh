#!/usr/bin/env bash
# 2026-12-04d call V12: after moving the tests' backend-buffer helper into cuda_test_util.h (BackendFloats), the two
# GPU test files that use it (models/ left behind: the tests that need the embedded model are not in the filter).
source scripts/gpu-lib.sh; call_setup
gtest_shards 2 200 'DeferredNormCuda.*:FuseDecCuda.MatmulQkvRopeEqualsPlainOps'
cd $OUT && tar cJf v12.tar.xz shard*.log && rm -f shard*.log
