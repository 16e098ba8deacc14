#!/usr/bin/env bash
# 2026-12-02 (fourth session) call K5, final main: (1) CudaAttentionPrefix.DISABLED_PrefixPassBench with the lazy
# rescale of the scaled kernel (the split kernel, unchanged, is the control: scaled / split was 0.906 in K2 and K4);
# (2) every CUDA GPU test but the emulation (8 shards); (3) bench-agents 1,16,64 on one shared 32k context (2 rounds);
# (4) Nsight Compute source counters of the scaled prefix kernel (64 agents, q8_0/turbo3t) and one 64-column mmq2 launch.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
timeout 100 $T --gtest_also_run_disabled_tests --gtest_filter='CudaAttentionPrefix.DISABLED_PrefixPassBench' > $OUT/prefix-bench.log 2>&1
note "prefix bench ($((SECONDS-t0)) s):"; grep -E '^(K/V|q8|f16|turbo)' $OUT/prefix-bench.log | tee -a $SUMMARY
gtest_shards 8 150 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
for round in 1 2; do
  timeout 100 $P bench-agents -m $M --device cuda --agents 1,16,64 --share on --context 32768 --suffix 32 --gen 32 --json \
    2>> $OUT/agents.err | grep '^{' | sed "s/^{/{\"round\":$round,/" >> $OUT/agents.jsonl
  note "agents r$round ($((SECONDS-t0)) s): $(tail -3 $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' | paste -sd' ')"
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 90 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
  --clock-control none -k 'regex:prefix256' --launch-skip 5 --launch-count 1 --import-source yes --export /tmp/p256 -f \
  $T --gtest_filter='CudaAttentionPrefix.DISABLED_PrefixPassBench' --gtest_also_run_disabled_tests > /dev/null 2>&1
$NCU --import /tmp/p256.ncu-rep --page details > $OUT/ncu-details-prefix256.txt 2>&1
$NCU --import /tmp/p256.ncu-rep --page source --csv --print-source sass > /tmp/p256.csv 2>/dev/null
python3 scripts/ncu_stalls.py /tmp/p256.csv prefix256 25 > $OUT/stalls-prefix256.txt 2>&1
python3 scripts/ncu_sass_regions.py /tmp/p256.csv prefix256 14 > $OUT/sass-regions-prefix256.txt 2>&1
note "ncu prefix256 ($((SECONDS-t0)) s): $(grep -E '^ +Duration' $OUT/ncu-details-prefix256.txt | head -1 | tr -s ' ') $(head -1 $OUT/sass-regions-prefix256.txt)"
timeout 90 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  --clock-control none -k 'regex:mmq2_kernel' --launch-skip 40 --launch-count 1 \
  $P bench-agents -m $M --device cuda --agents 64 --share on --context 4096 --suffix 32 --gen 4 > $OUT/ncu-mmq2.txt 2>&1
note "ncu mmq2 ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|Compute \(SM\) Throughput|DRAM Throughput|Grid Size|Block Size)' $OUT/ncu-mmq2.txt | tr -s ' ' | paste -sd' ')"
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f shard*.log *.err
