#!/usr/bin/env bash
# 2026-12-04 call S2: does YaRN act on the GPU? Call S1's greedy text at depth 4096 with --rope-scaling yarn
# differed from the CPU's from its first token. `eval ppl` of the held-out code (.gpucarry/ppl_dev.txt) on CUDA,
# plain and with YaRN (the CPU: 3.865 at -c 2048, 20.38 at 4096, 3.741 at 4096 with yarn 2), with the default
# kernels and with POLYKV_CUDA_FUSED=0 / POLYKV_CUDA_GRAPHS=0; then S1's n-gram cell with each.
source scripts/gpu-lib.sh; call_setup
E=models/polykv-code-26m-q8_0.gguf; T=.gpucarry/ppl_dev.txt
for a in "-c 2048" "-c 4096" "-c 4096 --rope-scaling yarn --rope-scale 2"; do
  note "ppl cuda $a: $($P eval ppl -m $E -f $T --device cuda $a 2>>$OUT/err.txt | awk '$1 == "perplexity" {print $2}')"
done
for e in POLYKV_CUDA_FUSED=0 POLYKV_CUDA_GRAPHS=0; do
  note "ppl cuda $e yarn 2: $(env $e $P eval ppl -m $E -f $T --device cuda -c 4096 --rope-scaling yarn --rope-scale 2 2>>$OUT/err.txt | awk '$1 == "perplexity" {print $2}')"
done
for e in POLYKV_NONE=1 POLYKV_CUDA_FUSED=0 POLYKV_CUDA_GRAPHS=0; do
  env $e $P bench -m $E --device cuda --rope-scaling yarn --rope-scale 4 --spec ngram --spec-n-max 3 --text .gpucarry/code.txt \
    -d 4096 -p 256 -n 128 -r 1 --json 2>>$OUT/err.txt | grep '^{' > $OUT/b.json
  note "bench $e: $(python3 -c "import json; j=json.load(open('$OUT/b.json')); print(j['output_ids'][:8], j['acceptance_rate'])")"
done
tail -5 $OUT/err.txt >> $SUMMARY
