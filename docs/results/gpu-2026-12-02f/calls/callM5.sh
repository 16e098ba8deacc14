#!/usr/bin/env bash
# 2026-12-02 (sixth session) call M5, final main: (1) every CUDA GPU test but the emulation (8 shards); (2) decode at
# depth 0, interleaved, 2 rounds x 3 reps: the warp-form store (default) against main's array forms
# (POLYKV_CUDA_KV_VITERBI=array) for q8_0/turbo3t, and q8_0/q8_0, q8_0/turbo3, f16/f16; (3) depth 32768 q8_0/turbo3t
# (default, array) against q8_0/q8_0; (4) depth 131072 q8_0/turbo3t; (5) bench-agents 1,64 on one 32k context;
# (6) Nsight Compute source counters of one decode-row store (warm), for the next step.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
gtest_shards 8 170 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for kvv in "q8_0 turbo3t default" "q8_0 turbo3t array" "q8_0 q8_0 default" "q8_0 turbo3 default" "f16 f16 default"; do
    set -- $kvv
    POLYKV_CUDA_KV_VITERBI=$3 timeout 60 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err |
      grep '^{' | sed "s/^{/{\"round\":$round,\"encoder\":\"$3\",/" >> $OUT/d0-final.jsonl
    note "r$round d0 $1/$2 $3 ($((SECONDS-t0)) s): $(tail -1 $OUT/d0-final.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
  done
done
for kvv in "q8_0 turbo3t default" "q8_0 q8_0 default" "q8_0 turbo3t array"; do
  set -- $kvv
  POLYKV_CUDA_KV_VITERBI=$3 timeout 80 $P bench -m $M $B -p 0 -n 32 -d 32768 -r 2 -ctk $1 -ctv $2 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"encoder\":\"$3\",/" >> $OUT/d32768-final.jsonl
  note "d32768 $1/$2 $3 ($((SECONDS-t0)) s): $(tail -1 $OUT/d32768-final.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
done
timeout 150 $P bench -m $M $B -p 0 -n 32 -d 131072 -r 2 -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err | grep '^{' >> $OUT/d131072-final.jsonl
note "d131072 q8_0/turbo3t ($((SECONDS-t0)) s): $(tail -1 $OUT/d131072-final.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
timeout 100 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 --json \
  2>> $OUT/bench.err | grep '^{' >> $OUT/agents-final.jsonl
note "agents ($((SECONDS-t0)) s): $(grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' $OUT/agents-final.jsonl | tail -4 | paste -sd' ')"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 120 $NCU --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  --clock-control none --cache-control none -k 'regex:kv_store' --launch-skip 40 --launch-count 1 --export /tmp/kv -f \
  $P bench -m $M --device cuda -p 16 -n 3 -r 1 -ctk q8_0 -ctv turbo3t --bandwidth 4240 > /dev/null 2>&1
$NCU --import /tmp/kv.ncu-rep --page source --csv --print-source sass > /tmp/kv.csv 2>/dev/null
python3 scripts/ncu_sass_regions.py /tmp/kv.csv kv_store 16 > $OUT/sass-regions-kv-store.txt 2>&1
note "done at $((SECONDS-t0)) s"
tail -3 $OUT/bench.err >> $SUMMARY
cd $OUT && tar cJf test-logs.tar.xz shard*.log bench.err && rm -f shard*.log bench.err
