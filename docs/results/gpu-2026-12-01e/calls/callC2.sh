#!/usr/bin/env bash
# 2026-12-01e call C2 (right after C1, warm machine: llama.cpp already built): fixture tests, then polykv vs llama.cpp.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
[ -x build-gpu/polykv_tests ] || tar xJf .gpucarry/build-gpu.tar.xz
mkdir -p /tmp/fx/models/random && tar xJf .gpucarry/fx.tar.xz -C /tmp/fx/models/random
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/fixture-summary.txt; setup_gpu_libraries
POLYKV_FIXTURES=/tmp/fx timeout 150 build-gpu/polykv_tests --gtest_filter='HybridCuda.*:HybridCudaLayers.*:HybridAttentionCuda.*:GdnCuda.*:CudaGraphStoreKey.*:HybridMtpCuda.*:MoeModelCuda.*:MoeV2ModelCuda.*:MoeRouterTies.*' --gtest_color=no > $OUT/fixture-tests.log 2>&1
echo "fixture tests rc=$?" >> $SUMMARY; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/fixture-tests.log >> $SUMMARY
xz -9 $OUT/fixture-tests.log
POLYKV_COMPARE_TESTS='CudaStepPlan.*' ATTN_BENCH=' ' PROFILE=0 ROUNDS=2 DEPTHS=32768 POLYKV_GPU_BUDGET_S=420 \
  VARIANTS="default= norm=POLYKV_CUDA_FUSE_NORM=1 gated=POLYKV_CUDA_FUSE_GATED=1" scripts/gpu-compare.sh > /dev/null 2>&1
cat $OUT/summary.txt $SUMMARY
