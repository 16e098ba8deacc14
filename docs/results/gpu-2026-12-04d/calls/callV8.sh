#!/usr/bin/env bash
# 2026-12-04d call V8 (the final build, deferred norms on): the dense fixture families (llama3_gqa, qwen2, qwen3, gemma2, gemma3) on CUDA
# against transformers (DenseGoldenCuda, new), fixtures carried compressed in .gpucarry/fx-*.tar.xz;
# the models/ GGUFs stayed behind for the 64 MiB carry limit, so only fixture tests run.
mkdir -p .gpucarry/fixtures && for f in .gpucarry/fx-*.tar.xz; do tar xJf "$f" -C .gpucarry/fixtures; done
source scripts/gpu-lib.sh; call_setup
gtest_shards 5 300 '*DenseGoldenCuda*'
grep -h "SKIPPED \]\|fixtures not found\|cannot open" $OUT/shard*.log | sort -u | head -8 >> $OUT/summary.txt
grep -h "max |dlogprob|\|top-1 differs" $OUT/shard*.log > $OUT/golden.txt
cd $OUT && tar cJf v8.tar.xz shard*.log && rm -f shard*.log
