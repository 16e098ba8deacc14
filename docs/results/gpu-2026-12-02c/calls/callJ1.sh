#!/usr/bin/env bash
# 2026-12-02 (third session) call J1 (f16-exact turbo levels; the tensor-core kernel's turbo V from an f16 pair
# table, one product per 16-dim tile; its bulk-copy tile pipeline): (1) the CUDA attention, KV and model GPU tests
# in 6 shards; (2) the kernel bench (pairs / mma-sync / mma-bulk); (3) decode at depth 32768, synth llama-3.1-8b
# q4_0, q8_0/turbo3t and q8_0/q8_0, each with the bulk and the sync pipeline, interleaved, two rounds of 3 reps.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
T=build-gpu/polykv_tests; P=build-gpu/polykv; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
t0=$SECONDS
F='*CudaAttention*:*AttentionCuda*:*CudaKv*:*KvCuda*:*KvStoreCuda*:ModelCuda*:*Invariant*:*Spec*Cuda*:*Mtp*Cuda*:-CudaAttentionSinks.SharedPrefix:*DISABLED*'
for i in 0 1 2 3 4 5; do
  ( GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i timeout 170 $T --gtest_filter="$F" --gtest_color=no > $OUT/shard$i.log 2>&1; rc=$?
    { echo "---- shard $i rc=$rc ($((SECONDS-t0)) s)"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/shard$i.log | sed 's/^/   /'; } >> $SUMMARY ) &
done
wait
note "==== tests done at $((SECONDS-t0)) s; failed: $(grep -h '^\[  FAILED  \] [A-Za-z]' $OUT/shard*.log | sort -u | paste -sd' ')"
grep -h -A3 'Failure' $OUT/shard*.log | head -30 >> $SUMMARY
timeout 100 $T --gtest_filter='CudaAttentionDecode8.DISABLED_DecodeModesBench' --gtest_also_run_disabled_tests --gtest_color=no > $OUT/kernel-bench.log 2>&1
note "kernel bench rc=$? at $((SECONDS-t0)) s"; grep -E '^(K/V|f16|q8_0|turbo)' $OUT/kernel-bench.log >> $SUMMARY
for round in 1 2; do
  for cfg in "q8_0 turbo3t bulk" "q8_0 turbo3t sync" "q8_0 q8_0 bulk" "q8_0 q8_0 sync"; do set -- $cfg
    POLYKV_CUDA_ATTN_TC_PIPE=$3 timeout 60 $P bench -m $M --device cuda -p 0 -n 32 -d 32768 -r 3 -ctk $1 -ctv $2 --json --bandwidth 4240 2>>$OUT/d32768.err | grep '^{' | sed "s/^{/{\"round\":$round,\"pipe\":\"$3\",/" >> $OUT/d32768.jsonl
    note "d32768 round $round $cfg: $(tail -1 $OUT/d32768.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') at $((SECONDS-t0)) s"
  done
done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f *.log *.err
