#!/usr/bin/env bash
# 2026-12-01f call G4: merged main: every CUDA GPU test in 6 shards; decode at 32768 with the new defaults
# (pair tables + early start) per KV pair, 2 interleaved rounds; bench-agents 1,16,64 (new engine step).
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz; mkdir -p /tmp/fx/models/random && tar xJf .gpucarry/fx.tar.xz -C /tmp/fx/models/random
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "commit $(git rev-parse --short HEAD 2>/dev/null) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
T=build-gpu/polykv_tests; M=/tmp/llama-3.1-8b-q4_0.gguf
( [ -s $M ] || build-gpu/polykv synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
t0=$SECONDS
F='*Cuda*:-CudaAttentionSinks.SharedPrefix:GptOssCuda.*:*DISABLED*'
for i in 0 1 2 3 4 5; do
  ( GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i POLYKV_FIXTURES=/tmp/fx timeout 330 $T --gtest_filter="$F" --gtest_color=no > $OUT/shard$i.log 2>&1; rc=$?
    { echo "---- shard $i rc=$rc ($((SECONDS-t0)) s)"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/shard$i.log | sed 's/^/   /'; } >> $SUMMARY ) &
done
wait
note "==== tests done at $((SECONDS-t0)) s"
for r in 1 2; do
  for cfg in "q8_0 q8_0" "q8_0 turbo3t" "turbo3t turbo3t" "f16 f16"; do set -- $cfg
    timeout 60 build-gpu/polykv bench -m $M --device cuda -p 0 -n 32 -d 32768 -r 2 -ctk $1 -ctv $2 --json --bandwidth 4240 2>>$OUT/d32768.err | grep '^{' | sed "s/^{/{\"round\":$r,/" >> $OUT/d32768-defaults.jsonl
    note "r$r d32768 $cfg: $(tail -1 $OUT/d32768-defaults.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') at $((SECONDS-t0)) s"
  done
done
timeout 200 build-gpu/polykv bench-agents -m $M --device cuda --agents 1,16,64 --share on --context 32768 --suffix 32 --gen 32 --json 2>$OUT/agents.err | grep '^{' > $OUT/agents.jsonl
note "agents: $(grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"host_ms_per_agent_step":[0-9.]+' $OUT/agents.jsonl | paste -sd' ')"
cd $OUT && tar cJf results.tar.xz *.log *.err *.jsonl 2>/dev/null; rm -f *.log *.err
