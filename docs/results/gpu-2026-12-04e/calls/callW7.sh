#!/usr/bin/env bash
# 2026-12-04e call W7: Nsight Compute of the wgmma mat-mul on a large matrix (llama-3.1-8b gate/up, 14336 x 4096, q4_0,
# 64 columns), for the next session's design: the first gate/up 64-column launch of CudaMmqBench (q4_0 only; the
# 8-n-tile launches before it: q/o 29 copies x 16 x (1 + 2), k/v 114 x 16 x (1 + 2) = 6864).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
POLYKV_MMQ_BENCH_TYPES=q4_0 timeout 200 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section SourceCounters --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --clock-control none \
  --kernel-name-base mangled -k 'regex:mmq3_kernel.*Li8E' --launch-skip 6864 --launch-count 1 --import-source yes \
  --export /tmp/gu -f $T --gtest_also_run_disabled_tests --gtest_filter='CudaMmqBench.DISABLED_VsOldPath' > $OUT/bench-under-ncu.log 2>&1
$NCU --import /tmp/gu.ncu-rep --page details > $OUT/ncu-details-gateup.txt 2>&1
$NCU --import /tmp/gu.ncu-rep --page source --csv --print-source sass > /tmp/gu.csv 2>/dev/null
python3 scripts/ncu_stalls.py /tmp/gu.csv mmq3 30 > $OUT/stalls-gateup.txt 2>&1
python3 scripts/ncu_sass_regions.py /tmp/gu.csv mmq3 14 > $OUT/sass-regions-gateup.txt 2>&1
note "ncu ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|Grid Size|Registers Per Thread|Issued Warp Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction|DRAM Throughput)' $OUT/ncu-details-gateup.txt | tr -s ' ' | paste -sd' ')"
