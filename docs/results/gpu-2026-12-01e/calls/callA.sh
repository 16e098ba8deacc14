#!/usr/bin/env bash
# 2026-12-01e call A: diagnose the flaky illegal access (EngineCuda.AgentsOnOnePoolInGpuMemory) and hybrid NaN.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
tar xJf .gpucarry/build-gpu.tar.xz; mkdir -p /tmp/fx/models/random && tar xJf .gpucarry/fx.tar.xz -C /tmp/fx/models/random
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
T=build-gpu/polykv_tests
F=--gtest_filter=EngineCuda.AgentsOnOnePoolInGpuMemory
# sanitizer runs in the background, concurrently with the plain runs
(POLYKV_CUDA_MMQ=0 timeout 300 $CS --tool memcheck --print-limit 20 $T $F > $OUT/memcheck-mmq0.log 2>&1; echo "memcheck mmq0 rc=$?" >> $SUMMARY) &
(timeout 300 $CS --tool memcheck --print-limit 20 $T $F > $OUT/memcheck-default.log 2>&1; echo "memcheck default rc=$?" >> $SUMMARY) &
(POLYKV_CUDA_HYBRID=1 POLYKV_FIXTURES=/tmp/fx timeout 300 $CS --tool initcheck --print-limit 20 $T --gtest_filter=HybridCuda.EngineAgentsOnOnePoolMatchTheirPromptsAlone > $OUT/initcheck-hybrid.log 2>&1; echo "initcheck hybrid rc=$?" >> $SUMMARY) &
(POLYKV_CUDA_MMQ=0 timeout 300 $CS --tool initcheck --print-limit 20 $T $F > $OUT/initcheck-engine.log 2>&1; echo "initcheck engine rc=$?" >> $SUMMARY) &
for mode in blocking plain; do
  f=0
  for i in $(seq 1 14); do
    if [ $mode = blocking ]; then export CUDA_LAUNCH_BLOCKING=1; else unset CUDA_LAUNCH_BLOCKING; fi
    POLYKV_CUDA_MMQ=0 timeout 40 $T $F > $OUT/run.log 2>&1 || { f=$((f+1)); cp $OUT/run.log $OUT/fail-$mode-$i.log; }
  done
  echo "plain runs $mode MMQ=0: $f of 14 failed" >> $SUMMARY
done
unset CUDA_LAUNCH_BLOCKING
rm -f $OUT/run.log
wait
for f in $OUT/*.log; do xz -9 $f; done
cat $SUMMARY
