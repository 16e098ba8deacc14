#!/usr/bin/env bash
# 2026-12-04c call U5: the delta rule over 4 blocks a head (d = 128). The hybrid CUDA tests, then synth
# Qwen3.5-9B q4_0 decode at depth 0 and 32768 (q8_0/turbo3t), POLYKV_CUDA_GDN_GROUPS=1 (one block a head, before)
# against the default (four), interleaved, 3 rounds of 3 repetitions; a timeline of the new default.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
# The qwen35 fixture travels in .gpucarry/fixtures (../shared does not travel: in calls U1, U2 and U4, and in
# T1 of 2026-12-04b, every fixture-dependent GPU test SKIPPED).
export POLYKV_FIXTURES=$PWD/.gpucarry/fixtures
gtest_shards 4 200 '*HybridCuda*:*HybridAttentionCuda*:*HybridMtpCuda*'
grep -h "SKIPPED \]\|fixtures not found" $OUT/shard*.log | sort -u | head -5 >> $OUT/summary.txt
note "tests done at $((SECONDS-t0)) s"
# The same bits with 1 and 4 blocks a head: logits of 12 rows (the token-sequential kernel) on the fixture.
# (the hybrid CUDA tests print their GPU-vs-CPU differences: the same figures with one block a head)
POLYKV_CUDA_GDN_GROUPS=1 timeout 200 $T --gtest_filter='*HybridCuda*:*HybridAttentionCuda*' --gtest_color=no > $OUT/groups1.log 2>&1
note "groups 1 tests rc=$?"
Q=/tmp/q35-9b-q4_0.gguf
[ -f $Q ] || timeout 150 $P synth --shape qwen3.5-9b --type q4_0 -o $Q > $OUT/synth.log 2>&1
note "synth at $((SECONDS-t0)) s"
for r in 0 1 2; do
  for v in groups1 groups4; do
    for d in 0 32768; do
      env $([ $v = groups1 ] && echo POLYKV_CUDA_GDN_GROUPS=1) timeout 60 $P bench -m $Q --device cuda -d $d -p 0 -n 128 -r 3 \
        --bandwidth 4240 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$r,/" >> $OUT/ab.jsonl
      note "r$r $v d$d: $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/q35-groups.csv \
  timeout 90 $P bench -m $Q --device cuda -d 0 -p 0 -n 64 -r 1 -ctk f16 -ctv f16 --bandwidth 4240 --json >/dev/null 2>>$OUT/bench.err
python3 scripts/cuda_trace_summary.py $OUT/q35-groups.csv --skip 8 --top 40 > $OUT/q35-groups.summary.txt 2>&1
note "$(head -2 $OUT/q35-groups.summary.txt | tr '\n' ' ')"
cd $OUT && xz -9 *.csv; tar cJf u5.tar.xz shard*.log bench.err && rm -f shard*.log
