#!/usr/bin/env bash
# NOT RUN this stop (no device time left to start a machine): kept for the next one.
# 2026-12-03 call P9, the final build: Nsight Compute of the chunked delta rule (gdn_chunked_kernel<128>, Qwen3.5-9B's
# shape, one 512-row step of the one-layer speed test): what bounds its ~36 us per 64-row chunk (for the next stop).
source scripts/gpu-lib.sh; call_setup
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 150 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section SourceCounters --clock-control none -k 'regex:gdn_chunked' --launch-skip 1 --launch-count 1 --import-source yes \
  --export /tmp/gdn -f $T --gtest_filter='GdnCuda.DISABLED_DecodeAndPrefillSpeed' --gtest_also_run_disabled_tests > $OUT/ncu.log 2>&1
$NCU --import /tmp/gdn.ncu-rep --page details > $OUT/ncu-details-gdn.txt 2>&1
$NCU --import /tmp/gdn.ncu-rep --page source --csv --print-source sass > /tmp/gdn.csv 2>/dev/null
python3 scripts/ncu_stalls.py /tmp/gdn.csv gdn_chunked 25 > $OUT/stalls-gdn.txt 2>&1
python3 scripts/ncu_sass_regions.py /tmp/gdn.csv gdn_chunked 14 > $OUT/sass-regions-gdn.txt 2>&1
note "$(grep -E '^ +(Duration|Registers Per Thread|Achieved Occupancy|Issued Ipc Active|Compute \(SM\) Throughput)' $OUT/ncu-details-gdn.txt | paste -sd' ')"
head -30 $OUT/stalls-gdn.txt >> $SUMMARY
cd $OUT && xz -9 ncu-details-gdn.txt ncu.log
