#!/usr/bin/env bash
# 2026-12-02 (second session) call I2 (the build of call I1): where the tensor-core decode kernel's time goes at
# 131072 keys (Nsight Compute: speed of light, warp states, scheduler, memory, source counters with stall
# sampling), q8_0/q8_0 and q8_0/turbo3t, from CudaAttentionDecode8.DISABLED_DecodeModesBench (launch order:
# per pair 4096, 32768, 131072 keys, 3 rounds of 23 calls per mode; mma's first 131072-key launch of
# q8_0/q8_0 is its 142nd, of q8_0/turbo3t its 556th).
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
T=build-gpu/polykv_tests; t0=$SECONDS
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for cfg in "q8q8 141" "q8t3t 555"; do set -- $cfg
  POLYKV_CUDA_ATTN_D8=mma timeout 200 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters \
    --clock-control none -k 'regex:decode_tc' --launch-skip $2 --launch-count 1 --import-source yes --export /tmp/$1 -f \
    $T --gtest_filter='CudaAttentionDecode8.DISABLED_DecodeModesBench' --gtest_also_run_disabled_tests > $OUT/ncu-run-$1.log 2>&1
  $NCU --import /tmp/$1.ncu-rep --page details > $OUT/ncu-details-$1.txt 2>&1
  $NCU --import /tmp/$1.ncu-rep --page source --csv --print-source sass > /tmp/$1.csv 2>$OUT/src-$1.err
  python3 scripts/ncu_stalls.py /tmp/$1.csv decode_tc 30 > $OUT/stalls-$1.txt 2>&1
  python3 scripts/ncu_sass_regions.py /tmp/$1.csv decode_tc 12 > $OUT/sass-regions-$1.txt 2>&1
  note "== $1 ($((SECONDS-t0)) s)"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Executed Ipc A|Issue Slots Busy|Warp Cycles Per Issued|Memory Throughput|DRAM Throughput|Block Limit" $OUT/ncu-details-$1.txt | head -16 | tee -a $SUMMARY
  head -45 $OUT/stalls-$1.txt | tee -a $SUMMARY
done
note "done at $((SECONDS-t0)) s"
rm -f $OUT/ncu-run-*.log
