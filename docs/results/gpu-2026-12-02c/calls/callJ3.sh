#!/usr/bin/env bash
# 2026-12-02 (third session) call J3 (main with the tensor-core kernel's mask test per tile and its int8 K products):
# (1) every CUDA GPU test in 8 shards; (2) the kernel bench (pairs / sync / bulk-f16 / bulk-int8); (3) decode, synth
# llama-3.1-8b q4_0, at depth 32768 (q8_0/turbo3t and q8_0/q8_0, K products int8 and f16, interleaved, two rounds of
# 3 reps) and 131072 (the default, one fill each, 2 reps).
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
T=build-gpu/polykv_tests; P=build-gpu/polykv; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
t0=$SECONDS
F='*Cuda*:CublasLoader.*:-CudaAttentionSinks.SharedPrefix:*DISABLED*'
for i in 0 1 2 3 4 5 6 7; do
  ( GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 230 $T --gtest_filter="$F" --gtest_color=no > $OUT/shard$i.log 2>&1; rc=$?
    { echo "---- shard $i rc=$rc ($((SECONDS-t0)) s)"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/shard$i.log | sed 's/^/   /'; } >> $SUMMARY ) &
done
wait
note "==== tests done at $((SECONDS-t0)) s; failed: $(grep -h '^\[  FAILED  \] [A-Za-z]' $OUT/shard*.log | sort -u | paste -sd' ')"
grep -h -A3 'Failure' $OUT/shard*.log | head -30 >> $SUMMARY
timeout 100 $T --gtest_filter='CudaAttentionDecode8.DISABLED_DecodeModesBench' --gtest_also_run_disabled_tests --gtest_color=no > $OUT/kernel-bench.log 2>&1
note "kernel bench rc=$? at $((SECONDS-t0)) s"; grep -E '^(K/V|f16|q8_0|turbo)' $OUT/kernel-bench.log >> $SUMMARY
for round in 1 2; do
  for cfg in "q8_0 turbo3t int8" "q8_0 turbo3t f16" "q8_0 q8_0 int8" "q8_0 q8_0 f16"; do set -- $cfg
    POLYKV_CUDA_ATTN_TC_K=$3 timeout 60 $P bench -m $M --device cuda -p 0 -n 32 -d 32768 -r 3 -ctk $1 -ctv $2 --json --bandwidth 4240 2>>$OUT/d32768.err | grep '^{' | sed "s/^{/{\"round\":$round,\"tc_k\":\"$3\",/" >> $OUT/d32768.jsonl
    note "d32768 round $round $cfg: $(tail -1 $OUT/d32768.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') at $((SECONDS-t0)) s"
  done
done
for cfg in "q8_0 turbo3t" "q8_0 q8_0"; do set -- $cfg
  timeout 150 $P bench -m $M --device cuda -p 0 -n 32 -d 131072 -r 2 -ctk $1 -ctv $2 --json --bandwidth 4240 2>>$OUT/d131072.err | grep '^{' >> $OUT/d131072.jsonl
  note "d131072 $cfg: $(tail -1 $OUT/d131072.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') at $((SECONDS-t0)) s"
done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f *.log *.err
