#!/usr/bin/env bash
# 2026-12-01f call G1: cuturbo's GPU tests, its store+attention bench, decode at 32768 per switch (interleaved).
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
[ -x build-gpu/polykv_tests ] || tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "commit $(git rev-parse --short HEAD 2>/dev/null); $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
T=build-gpu/polykv_tests; M=/tmp/llama-3.1-8b-q4_0.gguf
( [ -s $M ] || build-gpu/polykv synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) & SYN=$!
t0=$SECONDS
tst() { local n=$1 to=$2 e=$3 f=$4
  ( env $e timeout $to $T --gtest_filter="$f" --gtest_color=no > $OUT/$n.log 2>&1; rc=$?
    { echo "---- $n rc=$rc ($((SECONDS-t0)) s) env='$e'"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/$n.log | sed 's/^/   /'; } >> $SUMMARY ) & }
tst pairs 120 "" 'CudaKvDecodePairs.*:CudaKvDecodeTrellis.*:CudaAttentionEmulation.Decode8*'
tst early 150 "" 'CudaAttentionEarly.StoreThenAttentionEveryMode:ModelCudaEarly.*'
tst attn 200 "" 'CudaAttentionDecode8.*:CudaAttention.*:CudaKvStore*:CudaAttentionSmallDepth.*'
tst attnpairs 200 "POLYKV_CUDA_ATTN_D8=pairs POLYKV_CUDA_ATTN_EARLY=1" 'CudaAttentionDecode8.*:CudaAttention.*:CudaAttentionSmallDepth.*:ModelCuda.*'
wait
note "==== tests done at $((SECONDS-t0)) s"
timeout 120 $T --gtest_filter=CudaAttentionEarly.DISABLED_StoreAttentionBench --gtest_also_run_disabled_tests > $OUT/bench-early.log 2>&1; note "bench rc=$? at $((SECONDS-t0)) s"
wait $SYN
for r in 1 2; do
  for cfg in "q8_0 q8_0 packed 0" "q8_0 turbo3t packed 0" "q8_0 turbo3t packed 1" "q8_0 turbo3t pairs 0" "q8_0 turbo3t pairs 1" "turbo3t turbo3t packed 0" "turbo3t turbo3t pairs 1"; do
    set -- $cfg
    POLYKV_CUDA_ATTN_D8=$3 POLYKV_CUDA_ATTN_EARLY=$4 timeout 60 build-gpu/polykv bench -m $M --device cuda -p 0 -n 32 -d 32768 -r 2 -ctk $1 -ctv $2 --json --bandwidth 4240 2>>$OUT/d32768.err | grep '^{' | sed "s/^{/{\"d8\":\"$3\",\"early\":$4,\"round\":$r,/" >> $OUT/d32768.jsonl
    note "r$r $cfg: $(tail -1 $OUT/d32768.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') at $((SECONDS-t0)) s"
  done
done
cd $OUT && tar cJf results.tar.xz *.log *.err *.jsonl 2>/dev/null; rm -f *.log *.err
