#!/usr/bin/env bash
# gputexts/code.txt: a copy of ../shared/fixtures/models/trained/ppl_dev.txt (untracked in the checkout, carried with it).
# 2026-12-01g call G2 (the last ~250 s of this session's device time): main + cudaspec + mtpserve.
# (1) the new GPU tests: verify-step rows bit-identical to one-token decoding with --batch-invariant
#     (SpecInvarianceCuda.*), greedy identity of ngram / draft / mtp on CUDA (SpecCuda.*), the MTP head batched
#     and copied from a pool (MtpCuda.*), and how many rows differ WITHOUT the switch (DISABLED_DefaultModeReport);
# (2) speculative decoding on CUDA with --batch-invariant, embedded model, code text, n-max 3, 3 reps;
# (3) the switch's cost on the embedded model's plain prefill / decode.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
P=build-gpu/polykv; T=build-gpu/polykv_tests; E=models/polykv-code-26m-q8_0.gguf; t0=$SECONDS
( timeout 100 $T --gtest_filter='*SpecInvarianceCuda.*' --gtest_color=no > $OUT/t1.log 2>&1; echo "rc=$?" >> $OUT/t1.log ) &
( timeout 100 $T --gtest_filter='SpecCuda.*:MtpCuda.*:HybridMtpCuda.*' --gtest_color=no > $OUT/t2.log 2>&1; echo "rc=$?" >> $OUT/t2.log ) &
( timeout 100 $T --gtest_filter='SpecCuda.DISABLED_DefaultModeReport' --gtest_also_run_disabled_tests --gtest_color=no > $OUT/t3.log 2>&1; echo "rc=$?" >> $OUT/t3.log ) &
for pol in fixed adaptive; do for sp in ngram draft mtp; do
  extra=(); [ $sp = draft ] && extra=(--model-draft models/polykv-draft-q8_0.gguf); [ $sp = mtp ] && extra=(--model-mtp models/polykv-code-26m-mtp-head-q8_0.gguf)
  timeout 40 $P bench -m $E --device cuda --batch-invariant --spec $sp --spec-n-max 3 --spec-policy $pol "${extra[@]}" --text gputexts/code.txt -p 256 -n 128 -r 3 --json 2>>$OUT/spec.err | grep '^{' >> $OUT/spec-inv.jsonl
  note "spec inv $sp $pol: $(tail -1 $OUT/spec-inv.jsonl | grep -oE '"(speedup_median|speedup_min|speedup_max|acceptance_rate|tokens_per_step|decode_tok_s_base|decode_tok_s_spec|lossless)":[^,]*' | paste -sd' ') ($((SECONDS-t0)) s)"
done; done
for r in 1 2; do for inv in "" "--batch-invariant"; do
  timeout 30 $P bench -m $E --device cuda $inv -p 512 -n 128 -r 3 --json 2>>$OUT/cost.err | grep '^{' | sed "s/^{/{\"round\":$r,\"switch\":\"${inv:-off}\",/" >> $OUT/cost.jsonl
  note "cost r$r ${inv:-default}: $(tail -1 $OUT/cost.jsonl | grep -oE '"(prefill_tok_s|decode_tok_s)":[0-9.]+' | paste -sd' ')"
done; done
wait
for i in 1 2 3; do note "---- t$i: $(grep -E '^\[  (PASSED|FAILED) +\]|^rc=|tests? from .* ran' $OUT/t$i.log | paste -sd' ')"; grep -E 'FAILED|differ|default mode|drafted' $OUT/t$i.log | head -12 >> $SUMMARY; done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz --exclude=summary.txt *.log *.err *.jsonl 2>/dev/null; rm -f *.log *.err
