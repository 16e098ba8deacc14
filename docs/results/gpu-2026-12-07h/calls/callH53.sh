#!/usr/bin/env bash
# Call H53 (2026-12-07h, after H52): 1. every *Cuda* GPU test but those H52 ran, with models/ carried (the embedded
# models: graphs, speculative decoding's batch-invariant plans), 8 shards, while synth makes llama-3.1-8b q4_0.
# 2. #9's 131072 figure (llama-3.1-8b q4_0, q8_0/turbo3t: the target pair; -n 32 -r 2,
# one round).
# Carry .gpucarry/build-gpu.tar.xz (docs/ moved aside; models/ stays).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
L=/tmp/l8b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 6 > $OUT/logs/synth-l8b.log 2>&1 &
gtest_shards 8 150 '*Cuda*:-CudaAttention*:*Window*:GptOssCuda.*:DenseGoldenCuda.*:FuseDecCuda.Gemma2*:FuseDecCuda.GptOss*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
for kv in q8_0/turbo3t; do LIMIT=300 bench_tagged 1 at-l8b-${kv/\//-}-d131072 $P $L $kv 131072 32 2; done
tar cJf $OUT/logs.tar.xz -C $OUT logs $(cd $OUT && ls shard*.log) && rm -rf $OUT/logs $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
