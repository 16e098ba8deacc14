#!/usr/bin/env bash
# Call H30b (2026-12-06g): gpt-oss-20b q4_0 with the fused one-token MoE FFN (default) vs the five kernels
# (POLYKV_CUDA_MOE_FUSED=0), this build (main + the H27 patch), interleaved, 2 rounds.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
G=/tmp/gptoss-q4_0.gguf
[ -s $G ] || timeout 120 $P synth --shape gpt-oss-20b --type q4_0 -o $G --threads 12 > $OUT/synth.log 2>&1
note "model ready at $((SECONDS-t0)) s"
pk() {  # pk MODE ROUND
  timeout 60 env POLYKV_CUDA_MOE_FUSED=$1 $P bench -m $G --device cuda -r 3 --json --bandwidth 3350 -p 0 -n 128 -ctk f16 -ctv f16 2>>$OUT/polykv.err | grep '^{' | sed "s/^{/{\"round\":$2,\"tag\":\"fused$1\",/" >> $OUT/polykv.jsonl
  note "fused=$1 r$2 ($((SECONDS-t0)) s): $(grep "\"round\":$2,\"tag\":\"fused$1\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
pk 1 1; pk 0 1; pk 0 2; pk 1 2
