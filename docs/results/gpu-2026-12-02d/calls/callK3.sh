#!/usr/bin/env bash
# 2026-12-02 (fourth session) call K3: greedy argmax on the device (Backend::argmax_rows, the engine's plain greedy
# rows; POLYKV_ENGINE_ARGMAX=host is the previous path). (1) the ops, model, engine, speculative and MTP GPU tests;
# (2) bench-agents 1,16,64 on one shared 32k context, device and host argmax interleaved (2 rounds);
# (3) Nsight Compute of the 256-row prefix kernel with scaled products (64 agents, q8_0/turbo3t).
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
gtest_shards 6 170 '*OpsCuda*:*ModelCuda*:*EngineCuda*:*SpecCuda*:*MtpCuda*:*SpecInvarianceCuda*:*CudaGraph*:-*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
for round in 1 2; do
  for mode in device host; do
    POLYKV_ENGINE_ARGMAX=$mode timeout 100 $P bench-agents -m $M --device cuda --agents 1,16,64 --share on --context 32768 \
      --suffix 32 --gen 32 --json 2>> $OUT/agents.err | grep '^{' | sed "s/^{/{\"argmax\":\"$mode\",\"round\":$round,/" >> $OUT/agents.jsonl
    note "agents $mode r$round ($((SECONDS-t0)) s): $(tail -3 $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"decode_only_step_s":[0-9.]+' | paste -sd' ')"
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
# -k counts the matched kernel only: the 256-row kernel runs at 64 agents, first q8_0/turbo3t, in each round the
# scaled variant (23 calls) before the split one: launch 6 is a scaled one.
timeout 120 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
  --section Occupancy --clock-control none -k 'regex:prefix256' --launch-skip 5 --launch-count 1 \
  $T --gtest_filter='CudaAttentionPrefix.DISABLED_PrefixPassBench' --gtest_also_run_disabled_tests > $OUT/ncu-prefix256.txt 2>&1
note "ncu prefix256: $(grep -E '^ +(Duration|Registers Per Thread|Issue Slots Busy|Executed Ipc Active)' $OUT/ncu-prefix256.txt | paste -sd' ' | tr -s ' ')"
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f shard*.log *.err
