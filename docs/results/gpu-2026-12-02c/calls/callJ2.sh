#!/usr/bin/env bash
# 2026-12-02 (third session) call J2 (the build of call J1): (1) Nsight Compute of the tensor-core kernel with the
# bulk pipeline at 131072 keys (q8_0/q8_0 and q8_0/turbo3t, the first bulk launch of round 0 in the kernel bench);
# (2) decode at depth 131072, synth llama-3.1-8b q4_0, q8_0/turbo3t, q8_0/q8_0 and f16/f16 (one fill each, 2 reps).
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
T=build-gpu/polykv_tests; P=build-gpu/polykv; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
t0=$SECONDS
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for cfg in "q8q8 302" "q8t3t 1130"; do set -- $cfg
  timeout 100 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section SourceCounters --clock-control none -k 'regex:decode_tc' --launch-skip $2 --launch-count 1 --import-source yes \
    --export /tmp/$1 -f $T --gtest_filter='CudaAttentionDecode8.DISABLED_DecodeModesBench' --gtest_also_run_disabled_tests > /dev/null 2>&1
  $NCU --import /tmp/$1.ncu-rep --page details > $OUT/ncu-details-$1.txt 2>&1
  $NCU --import /tmp/$1.ncu-rep --page source --csv --print-source sass > /tmp/$1.csv 2>/dev/null
  python3 scripts/ncu_stalls.py /tmp/$1.csv decode_tc 25 > $OUT/stalls-$1.txt 2>&1
  python3 scripts/ncu_sass_regions.py /tmp/$1.csv decode_tc 14 > $OUT/sass-regions-$1.txt 2>&1
  note "== ncu $1 ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|Registers Per Thread)' $OUT/ncu-details-$1.txt | head -2 | paste -sd' ') $(head -1 $OUT/sass-regions-$1.txt)"
done
wait
for cfg in "q8_0 turbo3t" "q8_0 q8_0" "f16 f16"; do set -- $cfg
  timeout 160 $P bench -m $M --device cuda -p 0 -n 32 -d 131072 -r 2 -ctk $1 -ctv $2 --json --bandwidth 4240 2>>$OUT/d131072.err | grep '^{' | sed 's/^{/{"pipe":"bulk",/' >> $OUT/d131072.jsonl
  note "d131072 $cfg: $(tail -1 $OUT/d131072.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') at $((SECONDS-t0)) s"
done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err ncu-details-*.txt 2>/dev/null; rm -f *.log *.err ncu-details-*.txt
