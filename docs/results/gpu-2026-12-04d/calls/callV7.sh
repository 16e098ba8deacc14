#!/usr/bin/env bash
# 2026-12-04d call V7: the whole CUDA GPU test suite on the final build (deferred norms on, early launch after
# the norm only), with the embedded model and the qwen35 fixture carried (the draft model and the MTP head
# stayed behind for the 64 MiB limit: SpecCuda.GreedyIdentityNgramDraftMtp left out; the other fixtures' goldens
# run in calls V8-V9).
mkdir -p .gpucarry/fixtures && for f in .gpucarry/fx-*.tar.xz; do tar xJf "$f" -C .gpucarry/fixtures; done
source scripts/gpu-lib.sh; call_setup
gtest_shards 8 240 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*:SpecCuda.GreedyIdentityNgramDraftMtp:*DenseGoldenCuda*:*GptOssCuda*:MoeModelCuda.*'
grep -h "SKIPPED \]" $OUT/shard*.log | sort -u | head -20 >> $OUT/summary.txt
cd $OUT && tar cJf v7.tar.xz shard*.log && rm -f shard*.log
