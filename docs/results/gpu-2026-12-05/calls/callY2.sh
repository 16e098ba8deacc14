#!/usr/bin/env bash
# 2026-12-05 call Y2: every CUDA GPU test at this build (the first GPU run since the CPU's q8_0 K scores round the
# query, 2026-12-05, and with the L2 prefetch), then what call W1 of 2026-12-04g planned for ternary weights
# (docs/results/gpu-2026-12-04g/calls/callW1.sh): the embedded model requantized to tq2_0 / tq1_0 / ptq1_0, greedy
# 48 tokens on the CPU and on CUDA, and synth llama-3.1-8b decode / prefill per ternary type against q4_0. Last, the
# L2 prefetch's launch shape (call Y1 found it slower at every budget, the prefetch kernel exposed 5.2 us a launch):
# 16 KiB pieces on one warp per multiprocessor (Y1's) against 256 KiB pieces on 4 warps and 1 MiB pieces on 1 warp,
# budgets 16 / 32 MB, against off; synth llama-3.1-8b q4_0 at depth 0, q8_0/turbo3t and f16/f16, 2 rounds.
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
  [ $t = q4_0 ] || rm -f /tmp/l8-$t.gguf
done
M=/tmp/l8-q4_0.gguf
pk() {  # pk ROUND TAG MB PIECE_KB BLOCKS ARGS...
  local r=$1 tag=$2 mb=$3 kb=$4 nb=$5; shift 5
  POLYKV_CUDA_PREFETCH_MB=$mb POLYKV_CUDA_PREFETCH_PIECE_KB=$kb POLYKV_CUDA_PREFETCH_BLOCKS=$nb timeout 150 $P bench -m $M \
    --device cuda --json --bandwidth 4240 "$@" 2>>$OUT/bench.err | grep '^{' |
    sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",\"prefetch_mb\":$mb,\"piece_kb\":$kb,\"blocks\":$nb,/" >> $OUT/ab.jsonl
  note "$tag mb=$mb piece=$kb blocks=$nb r$r: $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  for kv in "q8_0 turbo3t" "f16 f16"; do
    set -- $kv
    pk $r d0-$1-$2 0 16 0 -r 3 -p 0 -n 128 -d 0 -ctk $1 -ctv $2
    for mb in 16 32; do
      for shape in "16 0" "256 4" "1024 1"; do
        pk $r d0-$1-$2 $mb $shape -r 3 -p 0 -n 128 -d 0 -ctk $1 -ctv $2
      done
    done
  done
done
cd $OUT && tar cJf y2-logs.tar.xz shard*.log run*.txt run.err quantize.log synth.log bench.err 2>/dev/null && rm -f shard*.log run*.txt
note "done at $((SECONDS-t0)) s"
