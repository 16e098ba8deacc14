#!/usr/bin/env bash
# 2026-12-06c call H19 (issue #9): the review's code on the GPU: one two-type split kernel (matvec_split_two_kernel,
# Epi::Rope / Epi::Store) and fill_split_args for every split launch. The GPU tests of the split mat-vecs, the fused
# q,k,v launches, deferred norms, model-level fused-vs-plain bits and the KV store; then one interleaved round of
# q4_K_M decode (POLYKV_CUDA_ROPE2=0 against the default) to see the merged kernel keeps H16's speed.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
M=/tmp/l8-q4_K_M.gguf
timeout 200 $P synth --shape llama-3.1-8b --type q4_K_M -o $M --threads 8 >>$OUT/logs/synth.log 2>&1 &
SYN=$!
F='FuseDecCuda.*:DeferredNormCuda.*:MatmulPartsCuda.*:MatvecSplitCuda.*:ModelFusedCuda.*:CudaKvStore.*'
timeout 200 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/logs/tests.log | head -10 >> $SUMMARY
wait $SYN; note "synth rc=$? at $((SECONDS-t0)) s"
for arm in 0 1; do
  POLYKV_CUDA_ROPE2=$arm timeout 60 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 128 -r 3 --bandwidth 3350 \
    --json 2>>$OUT/logs/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"rope2=$arm\",/" >>$OUT/ab.jsonl
  note "f16/f16 rope2=$arm ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | tr -d '"')"
done
cd $OUT && tar cJf h19-logs.tar.xz logs && rm -rf logs
note "done at $((SECONDS-t0)) s"
