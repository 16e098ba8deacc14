#!/usr/bin/env bash
# 2026-12-01f call G3: decode at 131072 q8_0/turbo3t, packed vs pairs+early; the engine's host paths old/new
# with 1 and 64 agents on one 32k context (bench/engine_step_gpu.sh).
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
[ -x build-gpu/polykv_tests ] || tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( [ -s $M ] || build-gpu/polykv synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) & SYN=$!
T=build-gpu/polykv_tests
for i in 1 2; do timeout 60 $T --gtest_filter='MatmulCuda.*' --gtest_color=no > $OUT/matmul$i.log 2>&1; note "MatmulCuda.* alone run $i rc=$? $(grep -E '^\[  (PASSED|FAILED) +\]' $OUT/matmul$i.log | head -3 | tr '\n' ' ')"; done
timeout 150 compute-sanitizer --tool memcheck $T --gtest_filter='MatmulCuda.MatvecMatchesReferenceEveryTypeAndWidth' --gtest_color=no > $OUT/matmul-memcheck.log 2>&1; note "memcheck rc=$? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) +\]' $OUT/matmul-memcheck.log | head -3 | tr '\n' ' ')"
while kill -0 $SYN 2>/dev/null; do sleep 1; done
REPS=2 AGENTS=1,64 timeout 330 bash .gpucarry/engine_step_gpu.sh > $OUT/engine_step_table.txt 2>&1; note "engine step rc=$? at $((SECONDS-t0)) s"; cat $OUT/engine_step_table.txt >> $SUMMARY
(( SECONDS - t0 < 400 )) && for cfg in "pairs 1"; do set -- $cfg
  POLYKV_CUDA_ATTN_D8=$1 POLYKV_CUDA_ATTN_EARLY=$2 timeout 170 build-gpu/polykv bench -m $M --device cuda -p 0 -n 32 -d 131072 -r 2 -ctk q8_0 -ctv turbo3t --json --bandwidth 4240 2>>$OUT/d131072.err | grep '^{' | sed "s/^{/{\"d8\":\"$1\",\"early\":$2,/" >> $OUT/d131072.jsonl
  note "d131072 $cfg: $(tail -1 $OUT/d131072.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') at $((SECONDS-t0)) s"
done
cd $OUT && tar cJf results.tar.xz *.log *.err *.jsonl *.txt 2>/dev/null; rm -f *.log *.err
