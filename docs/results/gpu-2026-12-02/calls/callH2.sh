#!/usr/bin/env bash
# 2026-12-02 call H2 (main 62311c8: cuBLAS loaded with dlopen on first use): (1) every CUDA GPU test in 6 shards
# (no fixtures carried; CublasLoader and every prefill test through the loaded cuBLAS); (2) prefill pp512 / pp4096
# and decode at depth 0, q8_0/turbo3t, 3 reps (cuBLAS path unchanged in speed?); (3) decode at depth 131072,
# f16/f16 and q8_0/turbo3t (one fill each, 2 reps): the issue's ">= 1.5x our own f16/f16" never had its f16 figure.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "commit $(git rev-parse --short HEAD 2>/dev/null) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader); LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
T=build-gpu/polykv_tests; P=build-gpu/polykv; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
t0=$SECONDS
F='*Cuda*:CublasLoader.*:-CudaAttentionSinks.SharedPrefix:*DISABLED*'
for i in 0 1 2 3 4 5; do
  ( GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i timeout 300 $T --gtest_filter="$F" --gtest_color=no > $OUT/shard$i.log 2>&1; rc=$?
    { echo "---- shard $i rc=$rc ($((SECONDS-t0)) s)"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/shard$i.log | sed 's/^/   /'; } >> $SUMMARY ) &
done
wait
note "==== tests done at $((SECONDS-t0)) s; failed: $(grep -h '^\[  FAILED  \] [A-Za-z]' $OUT/shard*.log | sort -u | paste -sd' ')"
for p in 512 4096; do
  timeout 90 $P bench -m $M --device cuda -p $p -n 32 -r 3 -ctk q8_0 -ctv turbo3t --json --bandwidth 4240 2>>$OUT/pp.err | grep '^{' >> $OUT/prefill.jsonl
  note "pp$p q8_0/turbo3t: $(tail -1 $OUT/prefill.jsonl | grep -oE '"(prefill_tok_s_reps|decode_tok_s_reps)":\[[^]]*\]' | paste -sd' ') ($((SECONDS-t0)) s)"
done
for cfg in "f16 f16" "q8_0 turbo3t"; do set -- $cfg
  timeout 200 $P bench -m $M --device cuda -p 0 -n 32 -d 131072 -r 2 -ctk $1 -ctv $2 --json --bandwidth 4240 2>>$OUT/d131072.err | grep '^{' >> $OUT/d131072.jsonl
  note "d131072 $cfg: $(tail -1 $OUT/d131072.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') at $((SECONDS-t0)) s"
done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f *.log *.err
