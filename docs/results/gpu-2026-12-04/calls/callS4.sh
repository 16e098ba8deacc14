#!/usr/bin/env bash
# 2026-12-04 call S4, final code (5829ce7 + docs: n-gram's default n-max 8): every CUDA GPU test but the emulation
# (8 shards), and bench --spec ngram with the default n-max on the embedded model, depth 0 and 4096 (YaRN x4),
# default kernels and --batch-invariant, 3 repetitions, on CUDA.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 8 200 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*'
note "tests done at $((SECONDS-t0)) s"
E=models/polykv-code-26m-q8_0.gguf
for d in 0 4096; do
  rope=; [ $d = 4096 ] && rope="--rope-scaling yarn --rope-scale 4"
  for bi in --batch-invariant --no-batch-invariant; do
    timeout 120 $P bench -m $E --device cuda $rope $bi --spec ngram --text .gpucarry/code.txt -d $d -p 256 -n 128 -r 3 --json \
      2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"mode\":\"$bi\",/" >> $OUT/spec.jsonl
    note "ngram default d$d $bi: $(tail -1 $OUT/spec.jsonl | grep -oE '"(spec_n_max|speedup_median|speedup_min|speedup_max|acceptance_rate|tokens_per_step|lossless)":[a-z0-9.]+' | paste -sd' ')"
  done
done
cd $OUT && tar cJf s4.tar.xz shard*.log bench.err && rm -f shard*.log
