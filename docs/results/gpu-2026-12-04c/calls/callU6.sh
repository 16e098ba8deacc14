#!/usr/bin/env bash
# 2026-12-04c call U6: the hybrid GPU tests with the whole qwen35 fixture traveling in .gpucarry/fixtures
# (../shared does not travel), this stop's final code: the transformers golden on CUDA, the engine's prefix
# cache with state checkpoints (and bench --depth on CUDA), the delta rule over 4 blocks a head.
source scripts/gpu-lib.sh; call_setup
export POLYKV_FIXTURES=$PWD/.gpucarry/fixtures
gtest_shards 4 200 '*Hybrid*Cuda*'
grep -h "SKIPPED \]\|fixtures not found" $OUT/shard*.log | sort -u | head -5 >> $OUT/summary.txt
cd $OUT && tar cJf u6.tar.xz shard*.log && rm -f shard*.log
