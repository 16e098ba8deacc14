#!/usr/bin/env bash
# 2026-12-04d call V2: head size 32 on CUDA attention (new), qwen2's fixture against transformers, and the
# fixture tests of the newer families (gpt-oss, qwen35, qwen35moe, qwen3moe) with every fixture carried
# (compressed in .gpucarry/fx-*.tar.xz; the models/ GGUFs stayed behind for the 64 MiB carry limit).
mkdir -p .gpucarry/fixtures && for f in .gpucarry/fx-*.tar.xz; do tar xJf "$f" -C .gpucarry/fixtures; done
source scripts/gpu-lib.sh; call_setup
gtest_shards 8 400 '*DenseGoldenCuda*:*GptOss*Cuda*:*CudaGraphStoreKey*:*Hybrid*Cuda*:*Moe*Cuda*:*Mtp*Cuda*:CudaAttention.*:CudaKvStore.*-*Speed*:*Bench*:*Bandwidth*'
grep -h "SKIPPED \]\|fixtures not found\|cannot open\|No such file" $OUT/shard*.log | sort -u | head -20 >> $OUT/summary.txt
grep -h "max |dlogprob|\|top-1 differs" $OUT/shard*.log > $OUT/golden.txt
cd $OUT && tar cJf v2.tar.xz shard*.log && rm -f shard*.log
