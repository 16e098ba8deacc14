#!/usr/bin/env bash
# Call H30c (warm machine after H30b; run as one command line): gpt-oss-20b q4_0, this build (main + the H27
# patch), POLYKV_CUDA_MOE_FUSED=noroute / 1 / 0, 2 rounds.
source scripts/gpu-lib.sh; call_setup >/dev/null; G=/tmp/gptoss-q4_0.gguf; for r in 1 2; do for m in noroute 1 0; do echo "fused=$m r$r: $(timeout 60 env POLYKV_CUDA_MOE_FUSED=$m $P bench -m $G --device cuda -r 3 --json -p 0 -n 128 -ctk f16 -ctv f16 2>/dev/null | grep '^{' | grep -oE '"decode_tok_s_reps":\[[^]]*\]')" | tee -a $OUT/h30c.txt; done; done
