#!/usr/bin/env bash
# 2026-12-02 (fourth session) call K1, main b71fa0e: (1) the attention and KV GPU tests (the review refactor of the
# tensor-core kernel's producers had not run on a GPU); (2) bench-agents 1,16,64 on one shared 32k context
# (q8_0/turbo3t, synth llama-3.1-8b q4_0); (3) Nsight Compute over two 64-row decode steps, summed per kernel.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
gtest_shards 4 150 '*CudaAttention*:*CudaKv*:*CudaGraph*'
wait
note "synth done at $((SECONDS-t0)) s"
timeout 150 $P bench-agents -m $M --device cuda --agents 1,16,64 --share on --context 32768 --suffix 32 --gen 32 --json \
  > $OUT/agents.jsonl 2> $OUT/agents.err
note "agents ($((SECONDS-t0)) s): $(grep '^{' $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"decode_step_s":[0-9.e-]+|"decode_forward_s":[0-9.e-]+' | paste -sd' ')"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
POLYKV_CUDA_PROFILE_ROWS="64:8:2" timeout 200 $NCU --profile-from-start off \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --page raw --clock-control none --cache-control none \
    --log-file $OUT/agents-ncu.log --export /tmp/ag -f \
    $P bench-agents -m $M --device cuda --agents 64 --share on --context 32768 --suffix 32 --gen 32 > $OUT/agents-ncu-run.log 2>&1
$NCU --import /tmp/ag.ncu-rep --csv --page raw > /tmp/ag.csv 2>/dev/null
python3 scripts/ncu_sum.py /tmp/ag.csv 2 "agents 64 x 32768" > $OUT/agents-ncu.txt 2>&1
head -30 $OUT/agents-ncu.txt >> $SUMMARY
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f *.log *.err
