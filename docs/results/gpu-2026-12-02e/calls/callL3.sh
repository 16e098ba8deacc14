#!/usr/bin/env bash
# 2026-12-02 (fifth session) call L3, main with rmsnorm_acts on clusters of 8 blocks: (1) the rmsnorm/acts GPU test
# (both kernels, bit-equality with the plain ops) and the model-level CUDA tests; (2) decode at depth 0, clusters on
# (default) against POLYKV_CUDA_RMS_CLUSTER=0, interleaved, 2 rounds x 3 reps, f16/f16 and q8_0/turbo3t; (3) a
# timeline with clusters (depth 0, f16/f16); (4) Nsight Compute of the merge kernel alone at depth 32768 (call L1's
# timeline shows it ending ~18 us after the decode kernel it merges).
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 6 150 'OpsActsCuda.*:*ModelCuda*:*Spec*Cuda*:*Invarian*Cuda*:*CudaModel*:EngineCuda*:-*Emulation*:*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    for v in cluster one; do
      e=1; [ $v = one ] && e=0
      POLYKV_CUDA_RMS_CLUSTER=$e timeout 100 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err |
        grep '^{' | sed "s/^{/{\"round\":$round,\"rms\":\"$v\",/" >> $OUT/d0-rms.jsonl
      note "r$round $1/$2 $v ($((SECONDS-t0)) s): $(tail -1 $OUT/d0-rms.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d0-f16-f16-cluster.csv timeout 120 $P bench -m $M $B -p 512 -n 64 -r 1 \
  -ctk f16 -ctv f16 >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
note "trace d0 cluster ($((SECONDS-t0)) s): $(tail -1 $OUT/trace-bench.jsonl | grep -oE '"decode_tok_s":[0-9.]+')"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 120 $NCU --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
  -k 'regex:merge_kernel' --launch-skip 40 --launch-count 2 $P bench -m $M $B -p 0 -n 4 -d 32768 -r 1 -ctk q8_0 -ctv turbo3t \
  > $OUT/ncu-merge.txt 2>&1
note "ncu merge ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|Grid Size|Block Size)' $OUT/ncu-merge.txt | tr -s ' ' | paste -sd' ')"
note "done at $((SECONDS-t0)) s"
tail -3 $OUT/bench.err >> $SUMMARY
cd $OUT && xz -9 *.csv; tar cJf test-logs.tar.xz shard*.log; rm -f shard*.log
