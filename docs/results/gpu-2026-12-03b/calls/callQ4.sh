#!/usr/bin/env bash
# 2026-12-03 (second session) call Q4, Q3's build: Nsight Compute of the tiled prefill attention kernel
# (attention_mma_kernel<128>, llama-3.1-8b q4_0, KV q8_0/turbo3t, the last layer's launch of a pp4096 prefill in one
# 4096-row pass): what bounds the kernel that long prompts wait for (Q3: 44% of pp4096, 74% of pp16384).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 16 > /dev/null 2>&1
note "synth done at $((SECONDS-t0)) s"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 240 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters --clock-control none \
  -k 'regex:attention_mma_kernel' --launch-skip 31 --launch-count 1 --import-source yes --export /tmp/att -f \
  $P bench -m $M --device cuda -p 4096 -n 0 -r 1 -ctk q8_0 -ctv turbo3t > $OUT/ncu.log 2>&1
$NCU --import /tmp/att.ncu-rep --page details > $OUT/ncu-details-att.txt 2>&1
$NCU --import /tmp/att.ncu-rep --page source --csv --print-source sass > /tmp/att.csv 2>/dev/null
python3 scripts/ncu_stalls.py /tmp/att.csv attention_mma 30 > $OUT/stalls-att.txt 2>&1
python3 scripts/ncu_sass_regions.py /tmp/att.csv attention_mma 16 > $OUT/sass-regions-att.txt 2>&1
note "$(grep -E '^ +(Duration|Registers Per Thread|Achieved Occupancy|Issued Ipc Active|Compute \(SM\) Throughput|Memory Throughput|Block Size|Grid Size|Dynamic Shared)' $OUT/ncu-details-att.txt | paste -sd' ')"
head -45 $OUT/stalls-att.txt >> $SUMMARY
note "done at $((SECONDS-t0)) s"
cd $OUT && xz -9 ncu-details-att.txt ncu.log; tar cf q4.tar summary.txt stalls-att.txt sass-regions-att.txt ncu-details-att.txt.xz ncu.log.xz
