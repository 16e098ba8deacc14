#!/usr/bin/env bash
# 2026-12-04 call S3: where the GPU's YaRN differs from the CPU's (call S2: the GPU's greedy text at depth 4096
# with YaRN x4 starts as the CPU's does without YaRN's attention factor). The first 8 greedy tokens of
# bench --spec ngram's plain run, on this machine's CPU and on CUDA, for depth 0 / 4096, with and without YaRN,
# KV q8_0/turbo3t and f16/f16, and CUDA without batch invariance.
source scripts/gpu-lib.sh; call_setup
E=models/polykv-code-26m-q8_0.gguf
first() { grep '^{' | python3 -c "import json,sys; j=json.load(sys.stdin); print(j['output_ids'][:8])"; }
for d in 0 4096; do
  for rope in "" "--rope-scaling yarn --rope-scale 4"; do
    for kv in "q8_0 turbo3t" "f16 f16"; do
      set -- $kv
      for dev in cpu cuda; do
        note "d$d [$rope] $1/$2 $dev: $($P bench -m $E --device $dev -t 16 $rope -ctk $1 -ctv $2 --spec ngram --spec-n-max 3 --text .gpucarry/code.txt -d $d -p 256 -n 16 -r 1 --json 2>>$OUT/err.txt | first)"
      done
      note "d$d [$rope] $1/$2 cuda, no batch invariance: $($P bench -m $E --device cuda $rope -ctk $1 -ctv $2 --spec ngram --spec-n-max 3 --no-batch-invariant --text .gpucarry/code.txt -d $d -p 256 -n 16 -r 1 --json 2>>$OUT/err.txt | first)"
    done
  done
done
grep -v '^KV cache' $OUT/err.txt | sort | uniq -c | head >> $SUMMARY
