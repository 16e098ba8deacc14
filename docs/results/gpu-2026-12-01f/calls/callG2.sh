#!/usr/bin/env bash
# 2026-12-01f call G2: every CUDA GPU test of gputest (main + cleanup + agenthost + cuturbo) in 6 parallel shards;
# initcheck with bulk-copy tracking; mmq bench; decode at 131072 q8_0/turbo3t, packed vs pairs+early.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz; mkdir -p /tmp/fx/models/random && tar xJf .gpucarry/fx.tar.xz -C /tmp/fx/models/random
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
T=build-gpu/polykv_tests; M=/tmp/llama-3.1-8b-q4_0.gguf
( [ -s $M ] || build-gpu/polykv synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
t0=$SECONDS
F='*Cuda*:-CudaAttentionSinks.SharedPrefix:*DISABLED*'
for i in 0 1 2 3 4 5; do
  ( GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i POLYKV_FIXTURES=/tmp/fx timeout 330 $T --gtest_filter="$F" --gtest_color=no > $OUT/shard$i.log 2>&1; rc=$?
    { echo "---- shard $i rc=$rc ($((SECONDS-t0)) s)"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran|^\[  FAILED' $OUT/shard$i.log | sed 's/^/   /'; } >> $SUMMARY ) &
done
wait
note "==== tests done at $((SECONDS-t0)) s"
timeout 90 compute-sanitizer --tool initcheck --check-bulk-copy yes $T --gtest_filter='CudaInitcheckProbe.*' > $OUT/initcheck.log 2>&1; note "initcheck bulk rc=$? $(grep -E 'ERROR SUMMARY' $OUT/initcheck.log)"
timeout 60 $T --gtest_filter=CudaMmqBench.DISABLED_VsOldPath --gtest_also_run_disabled_tests > $OUT/bench-mmq.log 2>&1; note "mmq bench rc=$? at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err *.jsonl 2>/dev/null; rm -f *.log *.err
