#!/usr/bin/env bash
# 2026-12-04c call U8: the fixture-dependent gpt-oss GPU tests and CudaGraphStoreKey, which had skipped since 2026-12-02d (docs/GPU.md):
# gptoss travels compressed (qwen35 left out: the carry limit) in .gpucarry/fx.tar.xz.
mkdir -p .gpucarry/fixtures && tar xJf .gpucarry/fx.tar.xz -C .gpucarry/fixtures
source scripts/gpu-lib.sh; call_setup
gtest_shards 4 200 '*GptOssCuda*'
grep -h "SKIPPED \]\|fixtures not found\|cannot open" $OUT/shard*.log | sort -u | head -8 >> $OUT/summary.txt
cd $OUT && tar cJf u8.tar.xz shard*.log && rm -f shard*.log
