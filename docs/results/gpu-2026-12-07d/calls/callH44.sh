#!/usr/bin/env bash
# NOT RUN: the session's device time was too short to start another machine (2026-12-07d).
# Call H44 (2026-12-07d): the final build of main (the new K rows self-encoded only where V is a turbo / trellis type):
# the model, attention, speculative and engine GPU tests in 8 shards (embedded, MTP-head and draft models carried).
# Carry .gpucarry/build-gpu.tar.xz and models/*.gguf.
source scripts/gpu-lib.sh; call_setup
gtest_shards 8 100 'ModelCuda*:CudaAttention*:ModelFusedCuda*:FuseDecCuda*:SpecInvarianceCuda*:GenerateCuda*:EngineCuda*:CudaKvStore*:MtpCuda*:SpecCuda*:CudaGraph*'
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
