#!/usr/bin/env bash
# 2026-12-03 call P5, main as it will land (the final build of this stop): every CUDA GPU test but the emulation
# (8 shards), as stop 27's call N2 ran them.
source scripts/gpu-lib.sh; call_setup
gtest_shards 8 170 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*'
cd $OUT && tar cJf logs.tar.xz shard*.log && rm -f shard*.log
