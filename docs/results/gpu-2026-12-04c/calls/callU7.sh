#!/usr/bin/env bash
# 2026-12-04c call U7: the fixture-dependent MoE GPU tests, which had skipped since 2026-12-02d (docs/GPU.md):
# qwen3moe and qwen35moe travel compressed in .gpucarry/fx.tar.xz.
mkdir -p .gpucarry/fixtures && tar xJf .gpucarry/fx.tar.xz -C .gpucarry/fixtures
source scripts/gpu-lib.sh; call_setup
gtest_shards 4 200 '*MoeModelCuda*:*HybridCudaLayers*:*HybridMtpCuda*:*CudaGraphStoreKey*'
grep -h "SKIPPED \]\|fixtures not found\|cannot open" $OUT/shard*.log | sort -u | head -8 >> $OUT/summary.txt
cd $OUT && tar cJf u7.tar.xz shard*.log && rm -f shard*.log
