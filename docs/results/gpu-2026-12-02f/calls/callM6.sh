#!/usr/bin/env bash
# 2026-12-02 (sixth session) call M6, final main's build: how many keys one decode split should read
# (POLYKV_CUDA_ATTN_ONE_SPLIT, default 256: one split, no partials, for contexts of at most that many keys; more keys
# are cut into splits). Decode at depth 0 (512-token prompt, 128 tokens: 512-640 keys), 1024 and 2048, interleaved,
# 2 rounds x 3 reps, f16/f16 and q8_0/turbo3t; and the attention / model GPU tests with 2048.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
POLYKV_CUDA_ATTN_ONE_SPLIT=2048 timeout 150 $T --gtest_filter='*AttentionCuda*:*ModelCuda*:GenerateCuda.*:EngineCuda*:FuseDecCuda.*:-*DISABLED*:*Speed*:*Bandwidth*' \
  --gtest_color=no > $OUT/onesplit-tests.log 2>&1
note "tests with ONE_SPLIT=2048 rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/onesplit-tests.log | paste -sd' ')"
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    for os in 256 1024; do
      POLYKV_CUDA_ATTN_ONE_SPLIT=$os timeout 60 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err |
        grep '^{' | sed "s/^{/{\"round\":$round,\"one_split\":$os,/" >> $OUT/onesplit.jsonl
      note "r$round d0 $1/$2 one_split=$os ($((SECONDS-t0)) s): $(tail -1 $OUT/onesplit.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
for d in 1024 2048; do
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    for os in 256 4096; do
      POLYKV_CUDA_ATTN_ONE_SPLIT=$os timeout 60 $P bench -m $M $B -p 0 -d $d -n 64 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err |
        grep '^{' | sed "s/^{/{\"one_split\":$os,/" >> $OUT/onesplit-depth.jsonl
      note "d$d $1/$2 one_split=$os ($((SECONDS-t0)) s): $(tail -1 $OUT/onesplit-depth.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
note "done at $((SECONDS-t0)) s"
tail -2 $OUT/bench.err >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz onesplit-tests.log bench.err && rm -f onesplit-tests.log bench.err
