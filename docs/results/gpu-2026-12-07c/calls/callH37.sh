#!/usr/bin/env bash
# Call H37 (2026-12-07c): every GPU test of main's build (3e1c2f0: x activations from the norm, the routing by
# ranks, down's register cap) in 8 shards, with the qwen3moe, gptoss, qwen35 and qwen35moe fixture sets (the hybrids
# route too, and the backend now keeps x's activations across a small f32 mat-vec). The embedded model does not fit
# the carry with them: the tests that open models/polykv-code-26m-q8_0.gguf fail with "cannot open" here.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/fixtures.
source scripts/gpu-lib.sh; call_setup
gtest_shards 8 ${MAX_S:-180} '*Cuda*:*cuda*:-*Emulation*:*DISABLED*'
grep -l 'cannot open' $OUT/shard*.log | paste -sd' ' | sed 's/^/shards with "cannot open": /' >> $SUMMARY
grep -h -B1 -A2 'cannot open' $OUT/shard*.log | grep -oE '\[ +FAILED +\] [A-Za-z0-9_./]+' | sort -u > $OUT/failed-cannot-open.txt
grep -h '^\[  FAILED  \] [A-Za-z]' $OUT/shard*.log | sort -u > $OUT/failed-all.txt
note "failed: $(wc -l < $OUT/failed-all.txt) tests; of them with a 'cannot open' nearby: $(wc -l < $OUT/failed-cannot-open.txt)"
cd $OUT && tar cJf shards.tar.xz shard*.log && rm shard*.log
