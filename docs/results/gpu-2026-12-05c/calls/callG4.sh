#!/usr/bin/env bash
# 2026-12-05c call G4 (main's code again, after the change of G1-G3 was removed): the fixture goldens of the MoE,
# gpt-oss and hybrid families (gptoss, qwen3moe, qwen35moe, qwen35 carried compressed in .gpucarry/fx-other.tar.xz;
# the models/ GGUFs stayed behind for the 64 MiB carry limit), as call V9 of gpu-2026-12-04d ran them.
mkdir -p .gpucarry/fixtures && for f in .gpucarry/fx-*.tar.xz; do tar xJf "$f" -C .gpucarry/fixtures; done
source scripts/gpu-lib.sh; call_setup
gtest_shards 6 240 '*GptOssCuda*:MoeModelCuda.*:MoeRouterTies.*:*HybridCudaLayers*:*HybridMtpCuda*:HybridCuda.Qwen35*:HybridCuda.Sequences*'
grep -h "SKIPPED \]\|cannot open" $OUT/shard*.log | sort -u | head -20 >> $OUT/summary.txt
grep -h "max |dlogprob|\|rel L2 to\|materialized" $OUT/shard*.log > $OUT/golden.txt
cd $OUT && tar cJf g4.tar.xz shard*.log && rm -f shard*.log
