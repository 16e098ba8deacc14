#!/usr/bin/env bash
# 2026-12-04d call V6 (after V5): early launch of the mat-vec also after the gated activation and the activation quantization (POLYKV_CUDA_EARLY_ALLOW=0|norm|unset); norms deferred into the mat-vec (Backend::rmsnorm_into_matmul; POLYKV_CUDA_DEFER_NORM=0:
# the fused norm as before). The GPU tests they touch (embedded model and the qwen35 fixture carried), then
# decode at depth 0 on synth llama-3.1-8b and qwen3.5-9b q4_0, deferred against not, interleaved, 2 rounds x
# 3 repetitions, f16/f16 and q8_0/turbo3t; one timeline of the deferred default.
mkdir -p .gpucarry/fixtures && for f in .gpucarry/fx-*.tar.xz; do tar xJf "$f" -C .gpucarry/fixtures; done
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
L=/tmp/l8b-q4_0.gguf Q=/tmp/q35-9b-q4_0.gguf
timeout 200 $P synth --shape llama-3.1-8b --type q4_0 -o $L > $OUT/synth.log 2>&1 &
timeout 200 $P synth --shape qwen3.5-9b --type q4_0 -o $Q >> $OUT/synth.log 2>&1 &

gtest_shards 4 200 '*DeferredNorm*:*ModelFusedCuda*:*FuseDecCuda*:*ModelCuda*:*GenerateCuda*:*SpecCuda*:*HybridCuda*:*OpsActsCuda*:*MatvecSplitCuda*:*MatmulCuda*:*EngineCuda*-*GreedyIdentityNgramDraftMtp*:*Bench*:*Speed*'
grep -h "rel L2\|materialized\|SKIPPED \]" $OUT/shard*.log | sort -u | head -80 > $OUT/defer-figures.txt
note "tests done at $((SECONDS-t0)) s"
wait; note "synth at $((SECONDS-t0)) s: $(ls -la /tmp/*.gguf | wc -l) files"
for r in 0 1; do
  for m in l8b q35; do
    M=$L; [ $m = q35 ] && M=$Q
    for kv in "f16 f16" "q8_0 turbo3t"; do
      set -- $kv
      for v in all norm defer plain; do
        env POLYKV_CUDA_DEFER_NORM=$([ $v = plain ] && echo 0 || echo 1) POLYKV_CUDA_EARLY_ALLOW=$(case $v in all) echo 2;; norm) echo norm;; *) echo 0;; esac) timeout 60 $P bench -m $M --device cuda -d 0 -p 512 -n 128 -r 3 \
          -ctk $1 -ctv $2 --bandwidth 4240 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"model\":\"$m\",\"round\":$r,/" >> $OUT/ab.jsonl
        note "r$r $m $1/$2 $v: $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
      done
    done
  done
done
CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/l8b-defer.csv \
  timeout 90 $P bench -m $L --device cuda -d 0 -p 0 -n 64 -r 1 -ctk f16 -ctv f16 --bandwidth 4240 --json >/dev/null 2>>$OUT/bench.err
python3 scripts/cuda_trace_summary.py $OUT/l8b-defer.csv --skip 8 --top 40 > $OUT/l8b-defer.summary.txt 2>&1
note "$(head -2 $OUT/l8b-defer.summary.txt | tr '\n' ' ')"
cd $OUT && xz -9 *.csv; tar cJf v6.tar.xz shard*.log bench.err && rm -f shard*.log
