#!/usr/bin/env bash
# 2026-12-04c call U4: the GDN input projections in one matmul_multi. The hybrid CUDA tests, then synth
# Qwen3.5-9B q4_0 decode at depth 0 and 32768 (q8_0/turbo3t), POLYKV_GDN_SEPARATE_PROJ=1 (four launches, before)
# against the default (one), interleaved, 3 rounds of 3 repetitions; a timeline of the new default.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 4 200 '*Hybrid*:-*Emulation*'
note "tests done at $((SECONDS-t0)) s"
Q=/tmp/q35-9b-q4_0.gguf
[ -f $Q ] || timeout 150 $P synth --shape qwen3.5-9b --type q4_0 -o $Q > $OUT/synth.log 2>&1
note "synth at $((SECONDS-t0)) s"
for r in 0 1 2; do
  for v in separate fused; do
    for d in 0 32768; do
      env $([ $v = separate ] && echo POLYKV_GDN_SEPARATE_PROJ=1) timeout 60 $P bench -m $Q --device cuda -d $d -p 0 -n 128 -r 3 \
        --bandwidth 4240 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$r,/" >> $OUT/ab.jsonl
      note "r$r $v d$d: $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/q35-fused.csv \
  timeout 90 $P bench -m $Q --device cuda -d 0 -p 0 -n 64 -r 1 -ctk f16 -ctv f16 --bandwidth 4240 --json >/dev/null 2>>$OUT/bench.err
python3 scripts/cuda_trace_summary.py $OUT/q35-fused.csv --skip 8 --top 40 > $OUT/q35-fused.summary.txt 2>&1
note "$(head -2 $OUT/q35-fused.summary.txt | tr '\n' ' ')"
cd $OUT && xz -9 *.csv; tar cJf u4.tar.xz shard*.log bench.err && rm -f shard*.log
