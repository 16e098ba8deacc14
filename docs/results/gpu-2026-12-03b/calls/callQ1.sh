#!/usr/bin/env bash
# 2026-12-03 (second session) call Q1, main with `--ubatch` and one conv kernel: (1) the Gated DeltaNet and hybrid
# GPU tests (the conv kernel of decode steps is now the row-parallel one; the chunked kernel's shared-memory opt-in
# is set once per device since f5ba7bd, never run on a GPU before); (2) prefill pp4096 against --ubatch 512 / 1024 /
# 2048 / 4096 (synth llama-3.1-8b and qwen3.5-9b q4_0, KV q8_0/turbo3t, interleaved, 2 rounds of 2 reps); (3) a kernel
# timeline of qwen3.5-9b pp4096 at ubatch 512 and 4096; (4) Nsight Compute of the chunked delta rule (stop 28's P9).
source scripts/gpu-lib.sh; call_setup
L=/tmp/llama-3.1-8b-q4_0.gguf H=/tmp/qwen3.5-9b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 8 > /dev/null 2>&1 ) &
( $P synth --shape qwen3.5-9b --type q4_0 -o $H --threads 8 > /dev/null 2>&1 ) &
gtest_shards 4 120 '*Gdn*:*Hybrid*:-*DISABLED*:*Speed*:*Bench*:*Emulation*'
timeout 60 $T --gtest_also_run_disabled_tests --gtest_filter='GdnCuda.DISABLED_*' > $OUT/gdn-speed.log 2>&1
grep -E '^(decode|prefill)' $OUT/gdn-speed.log >> $SUMMARY
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for m in $L $H; do
    for ub in 512 1024 2048 4096; do
      timeout 60 $P bench -m $m $B -p 4096 -n 0 -r 2 --ubatch $ub -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err | grep '^{' >> $OUT/ubatch.jsonl
      note "$(basename $m) pp4096 ub$ub ($((SECONDS-t0)) s): $(tail -1 $OUT/ubatch.jsonl | grep -oE '"prefill_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
for ub in 512 4096; do
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/t.csv timeout 60 \
    $P bench -m $H $B -p 4096 -n 0 -r 1 --ubatch $ub -ctk q8_0 -ctv turbo3t >/dev/null 2>>$OUT/bench.err
  python3 scripts/cuda_trace_totals.py $OUT/t.csv --top 30 > $OUT/trace-pp4096-ub$ub.txt 2>&1; rm -f $OUT/t.csv
  note "trace qwen3.5 pp4096 ub$ub:"; head -8 $OUT/trace-pp4096-ub$ub.txt >> $SUMMARY
done
note "benches done at $((SECONDS-t0)) s"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 150 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section SourceCounters --clock-control none -k 'regex:gdn_chunked' --launch-skip 1 --launch-count 1 --import-source yes \
  --export /tmp/gdn -f $T --gtest_filter='GdnCuda.DISABLED_DecodeAndPrefillSpeed' --gtest_also_run_disabled_tests > $OUT/ncu.log 2>&1
$NCU --import /tmp/gdn.ncu-rep --page details > $OUT/ncu-details-gdn.txt 2>&1
$NCU --import /tmp/gdn.ncu-rep --page source --csv --print-source sass > /tmp/gdn.csv 2>/dev/null
python3 scripts/ncu_stalls.py /tmp/gdn.csv gdn_chunked 25 > $OUT/stalls-gdn.txt 2>&1
python3 scripts/ncu_sass_regions.py /tmp/gdn.csv gdn_chunked 14 > $OUT/sass-regions-gdn.txt 2>&1
note "$(grep -E '^ +(Duration|Registers Per Thread|Achieved Occupancy|Issued Ipc Active|Compute \(SM\) Throughput)' $OUT/ncu-details-gdn.txt | paste -sd' ')"
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && xz -9 ncu-details-gdn.txt ncu.log; tar cJf logs.tar.xz shard*.log bench.err gdn-speed.log && rm -f shard*.log bench.err gdn-speed.log
