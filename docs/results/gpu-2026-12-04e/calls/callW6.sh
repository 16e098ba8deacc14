#!/usr/bin/env bash
# 2026-12-04e call W6: after the review (both mat-mul kernels share the chunk's unit decode and the epilogue,
# hd::mmq_stage_units / hd::mmq_store_tiles): the mat-mul GPU tests with each kernel, graph rows, matmul parts, engine
# and MoE tests, and the mat-mul benchmark for q4_0.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 4 150 'MmqCuda.*:CudaGraphRows.*:MatmulPartsCuda.*:EngineCuda.*:MoeCuda.*:ModelCuda*:-*DISABLED*'
POLYKV_CUDA_MMQ_WGMMA=0 timeout 100 $T --gtest_filter='MmqCuda.*:MatmulPartsCuda.*' > $OUT/mma-sync-tests.log 2>&1
note "mma.sync kernel tests rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/mma-sync-tests.log | paste -sd' ')"
grep -h "wgmma vs mma.sync" $OUT/shard*.log | sort -u > $OUT/wgmma-vs-mma.txt
POLYKV_MMQ_BENCH_TYPES=q4_0 timeout 100 $T --gtest_also_run_disabled_tests --gtest_filter='CudaMmqBench.DISABLED_VsOldPath' > $OUT/mmq-bench.log 2>&1
note "mmq bench at $((SECONDS-t0)) s"; grep "LAYER" $OUT/mmq-bench.log | tee -a $SUMMARY
cd $OUT && tar cJf w6-logs.tar.xz shard*.log mma-sync-tests.log && rm -f shard*.log mma-sync-tests.log
