#!/usr/bin/env bash
# 2026-12-04 call S1, main as it will land (YaRN / --rope-* and stop 31's commits): (1) every CUDA GPU test but
# the emulation (8 shards), as call P5 ran them; (2) speculative decoding on the GPU past the embedded model's
# 2048-token context: `bench --device cuda --spec ngram|mtp|draft --spec-n-max 3` on the held-out code text
# (bench/spec_corpora.py's code.txt, carried as .gpucarry/code.txt), depth 4096 with --rope-scaling yarn
# --rope-scale 4, 16384 with --rope-scale 10, and depth 0 without, 3 repetitions (plain and speculative
# interleaved, lossless check), 2 rounds.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 8 200 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*'
note "tests done at $((SECONDS-t0)) s"
E=models/polykv-code-26m-q8_0.gguf
for round in 1 2; do
  for spec in ngram mtp draft; do
    extra=
    [ $spec = mtp ] && extra="--model-mtp models/polykv-code-26m-mtp-head-q8_0.gguf"
    [ $spec = draft ] && extra="--model-draft models/polykv-draft-q8_0.gguf"
    for d in 4096 16384 0; do
      rope=; [ $d = 4096 ] && rope="--rope-scaling yarn --rope-scale 4"
      [ $d = 16384 ] && rope="--rope-scaling yarn --rope-scale 10"
      timeout 120 $P bench -m $E --device cuda $rope --spec $spec --spec-n-max 3 $extra --text .gpucarry/code.txt -d $d \
        -p 256 -n 128 -r 3 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"round\":$round,/" >> $OUT/spec.jsonl
      note "r$round $spec d$d ($((SECONDS-t0)) s): $(tail -1 $OUT/spec.jsonl | grep -oE '"(speedup_median|speedup_min|speedup_max|acceptance_rate|tokens_per_step|decode_tok_s_base|lossless)":[a-z0-9.]+' | paste -sd' ')"
    done
  done
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf s1.tar.xz shard*.log bench.err && rm -f shard*.log
