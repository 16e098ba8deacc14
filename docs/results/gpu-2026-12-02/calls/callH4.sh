#!/usr/bin/env bash
# 2026-12-02 call H4 (the build of call H3): where the new turbo3t KV store's instructions go (Nsight Compute
# source counters of one decode-step kv_store, q8_0/turbo3t, synth llama-3.1-8b q4_0), for the next encoder step.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
P=build-gpu/polykv; M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 16 > /dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 200 $NCU --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  --clock-control none -k 'regex:kv_store' --launch-skip 40 --launch-count 1 --import-source yes --export /tmp/kv -f \
  $P bench -m $M --device cuda -p 16 -n 3 -r 1 -ctk q8_0 -ctv turbo3t --bandwidth 4240 > $OUT/ncu-run.log 2>&1
$NCU --import /tmp/kv.ncu-rep --page details > $OUT/ncu-kv-store-details.txt 2>&1
$NCU --import /tmp/kv.ncu-rep --page source --csv --print-source sass > /tmp/kv.csv 2>$OUT/src.err
python3 scripts/ncu_sass_regions.py /tmp/kv.csv kv_store 16 > $OUT/sass-regions-kv-store.txt 2>&1
head -40 $OUT/sass-regions-kv-store.txt | tee -a $SUMMARY
grep -E "Duration|Executed Ipc|Issued Warp|Warp Cycles Per Issued" $OUT/ncu-kv-store-details.txt | head -8 | tee -a $SUMMARY
note "done at $((SECONDS-t0)) s"
rm -f $OUT/ncu-run.log
