#!/usr/bin/env bash
# gputexts/code.txt: a copy of ../shared/fixtures/models/trained/ppl_dev.txt (untracked in the checkout, carried with it).
# 2026-12-01g call G2b (same warm machine right after G2): speculative decoding with --batch-invariant, uncontended
# (in G2 the first four runs shared the GPU with three test processes), and the switch's cost on plain prefill /
# decode of the embedded model (G2's cost runs lacked --bandwidth).
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
P=build-gpu/polykv; E=models/polykv-code-26m-q8_0.gguf; t0=$SECONDS
for pol in fixed adaptive; do for sp in ngram draft mtp; do
  extra=(); [ $sp = draft ] && extra=(--model-draft models/polykv-draft-q8_0.gguf); [ $sp = mtp ] && extra=(--model-mtp models/polykv-code-26m-mtp-head-q8_0.gguf)
  timeout 40 $P bench -m $E --device cuda --batch-invariant --spec $sp --spec-n-max 3 --spec-policy $pol "${extra[@]}" --text gputexts/code.txt -p 256 -n 128 -r 3 --json 2>>$OUT/spec.err | grep '^{' >> $OUT/spec-inv.jsonl
  note "spec inv $sp $pol: $(tail -1 $OUT/spec-inv.jsonl | grep -oE '"(speedup_median|speedup_min|speedup_max|acceptance_rate|tokens_per_step|decode_tok_s_base|decode_tok_s_spec|lossless)":[^,]*' | paste -sd' ') ($((SECONDS-t0)) s)"
done; done
for r in 1 2 3; do for inv in "--no-batch-invariant" "--batch-invariant"; do
  timeout 30 $P bench -m $E --device cuda $inv -p 512 -n 128 -r 3 --bandwidth 4240 --json 2>>$OUT/cost.err | grep '^{' | sed "s/^{/{\"round\":$r,\"switch\":\"$inv\",/" >> $OUT/cost.jsonl
  note "cost r$r $inv: $(tail -1 $OUT/cost.jsonl | grep -oE '"(prefill_tok_s|decode_tok_s)":[0-9.]+' | paste -sd' ')"
done; done
note "done at $((SECONDS-t0)) s"
