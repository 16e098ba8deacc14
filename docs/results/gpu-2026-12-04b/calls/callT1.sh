#!/usr/bin/env bash
# 2026-12-04b call T1: every CUDA GPU test on this stop's code (the engine's per-source speculation policy and
# ngram+mtp), then bench --spec ngram / ngram+mtp / mtp on CUDA, embedded model, depth 0 and 4096 (YaRN x4),
# 3 repetitions, bench's default (--batch-invariant). The draft model stays behind (carry limit), so
# SpecCuda.GreedyIdentityNgramDraftMtp is left out.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 8 200 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*:SpecCuda.GreedyIdentityNgramDraftMtp'
note "tests done at $((SECONDS-t0)) s"
E=models/polykv-code-26m-q8_0.gguf
H=models/polykv-code-26m-mtp-head-q8_0.gguf
for d in 0 4096; do
  rope=; [ $d = 4096 ] && rope="--rope-scaling yarn --rope-scale 4"
  for sp in ngram ngram+mtp mtp; do
    extra=; [[ $sp == *mtp ]] && extra="--model-mtp $H"
    timeout 120 $P bench -m $E --device cuda $rope --spec $sp $extra --text .gpucarry/code.txt -d $d -p 256 -n 128 -r 3 --json \
      2>>$OUT/bench.err | grep '^{' >> $OUT/spec.jsonl
    note "$sp d$d: $(tail -1 $OUT/spec.jsonl | grep -oE '"(spec|spec_n_max|speedup_median|speedup_min|speedup_max|acceptance_rate|tokens_per_step|lossless)":"?[a-z0-9.+]+' | paste -sd' ')"
  done
done
cd $OUT && tar cJf t1.tar.xz shard*.log bench.err && rm -f shard*.log
