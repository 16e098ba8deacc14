#!/usr/bin/env bash
# 2026-12-02 call H1 (main ff77327 + build of it): (1) every CUDA GPU test in 6 shards (MtpCuda's pool-grouped
# head passes never ran on a GPU; OpsActsCuda checks the 1024-thread rmsnorm_acts for the plain ops' bits;
# CudaKv* the new encoder's bytes); (2) kv_store / small-depth attention micro-benchmarks (encoder old vs new);
# (3) decode at depth 0 (-p 512 -n 128 -r 3), old kernels (POLYKV_CUDA_RMS_WIDE=0 POLYKV_CUDA_KV_VITERBI=old)
# vs new, per KV pair, 2 interleaved rounds; (4) Nsight Compute: every kernel of one token, q8_0/turbo3t, new.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "commit $(git rev-parse --short HEAD 2>/dev/null) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
T=build-gpu/polykv_tests; P=build-gpu/polykv; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
t0=$SECONDS
F='*Cuda*:-CudaAttentionSinks.SharedPrefix:*DISABLED*'
for i in 0 1 2 3 4 5; do
  ( GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i timeout 300 $T --gtest_filter="$F" --gtest_color=no > $OUT/shard$i.log 2>&1; rc=$?
    { echo "---- shard $i rc=$rc ($((SECONDS-t0)) s)"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/shard$i.log | sed 's/^/   /'; } >> $SUMMARY ) &
done
wait
note "==== tests done at $((SECONDS-t0)) s"
timeout 120 $T --gtest_also_run_disabled_tests --gtest_filter='CudaAttentionSmallDepth.DISABLED_SmallKernelsMicros' > $OUT/micros.log 2>&1
grep -A6 "^kv_store" $OUT/micros.log | tee -a $SUMMARY
for r in 1 2; do
  for cfg in "f16 f16" "q8_0 q8_0" "q8_0 turbo3t"; do set -- $cfg
    for v in old new; do
      if [ $v = old ]; then envs=(env POLYKV_CUDA_RMS_WIDE=0 POLYKV_CUDA_KV_VITERBI=old); else envs=(env); fi
      timeout 60 "${envs[@]}" $P bench -m $M --device cuda -p 512 -n 128 -r 3 -ctk $1 -ctv $2 --json --bandwidth 4240 2>>$OUT/d0.err | grep '^{' | sed "s/^{/{\"round\":$r,\"kernels\":\"$v\",/" >> $OUT/d0.jsonl
      note "r$r d0 $cfg $v: $(tail -1 $OUT/d0.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') ($((SECONDS-t0)) s)"
    done
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 150 $NCU --metrics gpu__time_duration.sum,dram__bytes_read.sum --clock-control none --cache-control none --export /tmp/pk -f \
  $P bench -m $M --device cuda -p 512 -n 3 -r 1 -ctk q8_0 -ctv turbo3t --bandwidth 4240 > $OUT/ncu-run.log 2>&1
$NCU --import /tmp/pk.ncu-rep --csv --page raw > /tmp/pk.csv 2>/dev/null && python3 scripts/ncu_table.py /tmp/pk.csv "polykv q8_0/turbo3t" > $OUT/profile-q8_0-turbo3t.txt 2>&1
head -16 $OUT/profile-q8_0-turbo3t.txt | tee -a $SUMMARY
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err 2>/dev/null; rm -f *.log *.err
