#!/usr/bin/env bash
# 2026-12-03 call P8, the final build: the GPU tests that need the fixtures (qwen35 and qwen35moe against
# transformers and the CPU, now through the chunked delta rule for their 48-token prompts; gpt-oss; qwen3moe),
# with the fixtures carried as .gpucarry/fx.tar.xz (the embedded model left behind for this call to make room).
source scripts/gpu-lib.sh; call_setup
mkdir -p /tmp/fx && tar xJf .gpucarry/fx.tar.xz -C /tmp/fx
export POLYKV_FIXTURES=/tmp/fx/fixtures POLYKV_REQUIRE_FIXTURES=1
gtest_shards 4 150 '*Hybrid*:GptOssCuda.*:MoeModelCuda.*:*Gdn*:-*DISABLED*:*Emulation*'
cd $OUT && tar cJf logs.tar.xz shard*.log && rm -f shard*.log
