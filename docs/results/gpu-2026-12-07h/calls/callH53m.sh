#!/usr/bin/env bash
# Call H53m (2026-12-07h): what 280 s of device time left could hold of H53: the model-level GPU tests that reach the
# tensor-core decode kernels end to end (ModelDepthCuda: head size 256 at depth 700; SpecCuda / ModelCuda: the
# batch-invariant plans, which run the head-size-64 kernel at every depth), 8 shards, 100 s at most.
# Carry .gpucarry/build-gpu.tar.xz (docs/ moved aside; models/ without the draft model).
source scripts/gpu-lib.sh; call_setup
gtest_shards 8 100 '*ModelDepthCuda*:SpecCuda.*:*ModelCuda*'
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
