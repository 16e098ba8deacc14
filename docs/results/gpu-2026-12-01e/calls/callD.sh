#!/usr/bin/env bash
# 2026-12-01e call D: the attention tests C1 did not reach, MoE v1/v2 model bench, depth 131072.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
[ -x build-gpu/polykv_tests ] || tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
T=build-gpu/polykv_tests; M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( [ -s $M ] || build-gpu/polykv synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
timeout 200 $T --gtest_filter='CudaAttentionSinks.*:CudaAttentionSmallDepth.*:CudaAttentionPrefix.*:CudaKvDecode*' --gtest_color=no > $OUT/attn2.log 2>&1
note "attn2 rc=$? at $((SECONDS-t0)) s: $(grep -E '^\[  (PASSED|FAILED) +\]' $OUT/attn2.log | paste -sd' ')"
wait
WORK=/tmp/moework TYPES=q4_0 timeout 120 bash -c "sed 's/--json 2>/--json --bandwidth 4240 2>/' bench/moe_cuda_v2_bench.sh > /tmp/mb.sh; bash /tmp/mb.sh build-gpu/polykv $OUT 3" > $OUT/moe-bench.log 2>&1
note "moe: $(grep -oE '"moe_kernel":"v[12]"|"decode_tok_s_reps":\[[^]]*\]|"prefill_tok_s_reps":\[[^]]*\]' $OUT/moe-v1-v2.jsonl | paste -sd' ')"
left=$((520 - (SECONDS - t0)))
(( left > 150 )) && { timeout $((left-10)) build-gpu/polykv bench -m $M --device cuda -p 0 -n 32 -d 131072 -r 2 -ctk q8_0 -ctv turbo3t --json --bandwidth 4240 2>/dev/null | grep '^{' >> $OUT/d131072.jsonl
  note "d131072 q8_0/turbo3t: $(grep -oE '"decode_tok_s_reps":\[[^]]*\]' $OUT/d131072.jsonl)"; }
cd $OUT && tar cJf results.tar.xz *.log 2>/dev/null; rm -f *.log
