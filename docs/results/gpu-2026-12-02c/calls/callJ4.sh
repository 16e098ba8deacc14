#!/usr/bin/env bash
# 2026-12-02 (third session) call J4 (final main: the loosened turbo3t/turbo3t quality bound of
# ModelCuda.LogitsMatchTheCpuBackend, the merged batch bound of adaptive speculation): the model, speculative and
# MTP GPU tests in 4 shards.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
T=build-gpu/polykv_tests
t0=$SECONDS
F='*ModelCuda*:*Spec*Cuda*:*Mtp*Cuda*:*Invariance*Cuda*:-*DISABLED*'
for i in 0 1 2 3; do
  ( GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 100 $T --gtest_filter="$F" --gtest_color=no > $OUT/shard$i.log 2>&1; rc=$?
    { echo "---- shard $i rc=$rc ($((SECONDS-t0)) s)"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/shard$i.log | sed 's/^/   /'; } >> $SUMMARY ) &
done
wait
note "==== tests done at $((SECONDS-t0)) s; failed: $(grep -h '^\[  FAILED  \] [A-Za-z]' $OUT/shard*.log | sort -u | paste -sd' ')"
grep -h "turbo3t/turbo3t prefill" $OUT/shard*.log >> $SUMMARY
grep -h -A3 'Failure' $OUT/shard*.log | head -30 >> $SUMMARY
cd $OUT && tar cJf results.tar.xz *.log 2>/dev/null; rm -f *.log
