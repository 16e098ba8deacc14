#!/usr/bin/env bash
# 2026-12-01e call E: the two GPU tests fixed after call C.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
tar xJf .gpucarry/build-gpu.tar.xz; mkdir -p /tmp/fx/models/random && tar xJf .gpucarry/fx.tar.xz -C /tmp/fx/models/random
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
POLYKV_FIXTURES=/tmp/fx timeout 100 build-gpu/polykv_tests --gtest_filter='FuseDecCuda.MatmulAddRmsnormEqualsPlainOps:MoeV2ModelCuda.*' --gtest_color=no > $OUT/e.log 2>&1
echo "rc=$?" >> $OUT/e.log; grep -E "^\[  (PASSED|FAILED)|Failure|dlogprob|rc=" $OUT/e.log
