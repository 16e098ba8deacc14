#!/usr/bin/env bash
# 2026-12-05 call Y2: every CUDA GPU test at this build (the first GPU run since the CPU's q8_0 K scores round the
# query, 2026-12-05, and with the L2 prefetch), then what call W1 of 2026-12-04g planned for ternary weights
# (docs/results/gpu-2026-12-04g/calls/callW1.sh): the embedded model requantized to tq2_0 / tq1_0 / ptq1_0, greedy
# 48 tokens on the CPU and on CUDA, and synth llama-3.1-8b decode / prefill per ternary type against q4_0.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 8 220 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*:SpecCuda.GreedyIdentityNgramDraftMtp'
note "tests done at $((SECONDS-t0)) s"
export POLYKV_CUDA_TERNARY=1  # the backend takes ternary weights only with it (matmul_cuda.h); after the tests
E=models/polykv-code-26m-q8_0.gguf
PROMPT=$(python3 -c 'print(",".join(str(i) for i in [1, 442, 2180, 7809, 1494, 7809, 7794, 285, 7809, 7794, 285, 858, 267]))')
for t in tq2_0 tq1_0 ptq1_0; do
  $P quantize $E /tmp/e-$t.gguf $t >>$OUT/quantize.log 2>&1
  for dev in cpu cuda; do
    timeout 60 $P run -m /tmp/e-$t.gguf --ids $PROMPT -n 48 --temp 0 --device $dev >$OUT/run-$t-$dev.txt 2>>$OUT/run.err
  done
  if cmp -s $OUT/run-$t-cpu.txt $OUT/run-$t-cuda.txt; then note "run $t: cpu and cuda print the same 48 tokens"
  else note "run $t: cpu and cuda differ (first differing byte: $(cmp $OUT/run-$t-cpu.txt $OUT/run-$t-cuda.txt | head -1))"; fi
done
for t in q4_0 tq2_0 tq1_0 ptq1_0; do
  timeout 240 $P synth --shape llama-3.1-8b --type $t -o /tmp/l8-$t.gguf --threads 8 >>$OUT/synth.log 2>&1 || { note "synth $t failed"; continue; }
  timeout 200 $P bench -m /tmp/l8-$t.gguf --device cuda -ctk f16 -ctv f16 -p 512 -n 128 -r 2 --bandwidth 4240 --json \
    2>>$OUT/bench.err | grep '^{' >>$OUT/bench.jsonl
  note "l8 $t ($((SECONDS-t0)) s): $(tail -1 $OUT/bench.jsonl | grep -oE '"(prefill_tok_s|decode_tok_s|decode_floor_tok_s|decode_fraction_of_floor|weights_mib)":[0-9.e+-]+' | paste -sd' ')"
  rm -f /tmp/l8-$t.gguf
done
cd $OUT && tar cJf y2-logs.tar.xz shard*.log run*.txt run.err quantize.log synth.log bench.err 2>/dev/null && rm -f shard*.log run*.txt
note "done at $((SECONDS-t0)) s"
