#!/usr/bin/env bash
# Call H37b (2026-12-07c): the GPU tests that open the embedded model (and its MTP head and the draft model), which
# H37 could not carry beside the fixtures. Carry .gpucarry/build-gpu.tar.xz only (models/ travels in the tree).
source scripts/gpu-lib.sh; call_setup
gtest_shards 8 ${MAX_S:-150} '*ModelCuda*:*SpecInvarianceCuda*:*CudaGraph*:*EngineCuda*:*FuseDecCuda*:*GenerateCuda*:*MtpCuda*:*SpecCuda*:*TernaryCuda*:*ModelFusedCuda*:-*Emulation*:*DISABLED*'
cd $OUT && tar cJf shards.tar.xz shard*.log && rm shard*.log
