#!/usr/bin/env bash
# 2026-12-03 (third session) call R2, main with the gated fold's per-warp arrivals (one acq_rel atomic a warp):
# (1) the fused-op GPU tests; (2) llama-3.1-8b q4_0 decode at depth 0, POLYKV_CUDA_FUSE_GATED on vs 0,
# interleaved, 3 rounds, f16/f16 and q8_0/turbo3t; (3) one CUPTI timeline of each (f16/f16).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 4 150 'FuseDecCuda.*:ModelFusedCuda.*:GenerateCuda.*'
wait
note "synth and tests done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
for round in 1 2 3; do
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    for v in gated plain; do
      e=; [ $v = plain ] && e=POLYKV_CUDA_FUSE_GATED=0
      env $e timeout 90 $P bench -m $M $B -ctk $1 -ctv $2 -p 512 -n 128 -r 3 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$round,/" >> $OUT/gated.jsonl
      note "$1/$2 d0 $v ($((SECONDS-t0)) s): $(tail -1 $OUT/gated.jsonl | grep -oE '"decode_tok_s_reps":[^a-z]+')"
    done
  done
done
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
for v in gated plain; do
  e=; [ $v = plain ] && e=POLYKV_CUDA_FUSE_GATED=0
  env $e CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d0-$v.csv timeout 90 $P bench -m $M $B -ctk f16 -ctv f16 -p 512 -n 64 -r 1 > /dev/null 2>>$OUT/bench.err
  python3 scripts/cuda_trace_summary.py $OUT/trace-d0-$v.csv --skip 4 > $OUT/trace-d0-$v.summary.txt 2>&1 && rm -f $OUT/trace-d0-$v.csv
  sed -n 2p $OUT/trace-d0-$v.summary.txt >> $SUMMARY; grep -E "gated|matvec_split_kernel" $OUT/trace-d0-$v.summary.txt >> $SUMMARY
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf r2.tar.xz shard*.log bench.err && rm -f shard*.log
