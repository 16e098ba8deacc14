#!/usr/bin/env bash
# 2026-12-03 (second session) call Q2, main with Backend::default_prompt_rows (CUDA 4096): (1) every CUDA GPU test but
# the emulation (8 shards); (2) the embedded model's greedy output on the GPU with a ~1500-token prompt at --ubatch
# 64 / 512 / default (4096): the same tokens?; (3) prefill pp512 / pp4096 at the default against --ubatch 512, interleaved,
# 2 rounds of 2 reps, on synth llama-3.1-8b, gemma-3-4b, qwen3-30b-a3b (MoE) and gpt-oss-20b (MoE, mxfp4), q4_0.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; D=/tmp/m; mkdir -p $D
( for s in llama-3.1-8b gemma-3-4b qwen3-30b-a3b gpt-oss-20b; do
    $P synth --shape $s --type q4_0 -o $D/$s.gguf --threads 4 > /dev/null 2>&1; done ) &
gtest_shards 8 170 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s: $(ls $D | paste -sd' ')"
M=models/polykv-code-26m-q8_0.gguf
PROMPT="$(for i in $(seq 60); do printf 'def f%d(x):\n    return x * %d + %d\n\n' $i $i $((i*i)); done)"
for ub in 64 512 0; do
  a=; [ $ub != 0 ] && a="--ubatch $ub"
  timeout 60 $P run -m $M --device cuda -p "$PROMPT" -n 48 $a > $OUT/run-ub$ub.txt 2> $OUT/run-ub$ub.err
  note "run ub$ub rc=$? md5 $(md5sum < $OUT/run-ub$ub.txt | cut -c1-12) $(grep -oE 'prompt: [0-9]+ tokens' $OUT/run-ub$ub.err)"
done
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for s in llama-3.1-8b gemma-3-4b qwen3-30b-a3b gpt-oss-20b; do
    for p in 512 4096; do
      for ub in 512 0; do
        a=; [ $ub != 0 ] && a="--ubatch $ub"
        timeout 90 $P bench -m $D/$s.gguf $B -p $p -n 0 -r 2 $a -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err | grep '^{' >> $OUT/prefill.jsonl
        note "$s pp$p ub$ub ($((SECONDS-t0)) s): $(tail -1 $OUT/prefill.jsonl | grep -oE '"(ubatch|prefill_tok_s_reps)":[^a-z]+' | paste -sd' ')"
      done
    done
  done
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz shard*.log bench.err run-*.err prefill.jsonl && rm -f shard*.log bench.err
