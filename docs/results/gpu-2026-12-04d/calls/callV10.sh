#!/usr/bin/env bash
# 2026-12-04d call V10: Qwen3.5's gated-q attention layers read h with one matmul_multi of q (with its gate), k
# and v, so their norms are deferred too (POLYKV_GATED_Q_SEPARATE=1: the two matmuls before). Hybrid and model
# GPU tests (embedded model and qwen35 carried), then synth qwen3.5-9b q4_0 decode at depth 0, interleaved, 2
# rounds x 3 repetitions, f16/f16 and q8_0/turbo3t.
mkdir -p .gpucarry/fixtures && for f in .gpucarry/fx-*.tar.xz; do tar xJf "$f" -C .gpucarry/fixtures; done
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
Q=/tmp/q35-9b-q4_0.gguf
timeout 200 $P synth --shape qwen3.5-9b --type q4_0 -o $Q > $OUT/synth.log 2>&1 &
gtest_shards 4 200 '*Hybrid*Cuda*:*ModelFusedCuda*:*DeferredNorm*:*CudaGraphStoreKey*-*HybridCudaLayers*:*HybridMtpCuda*'
note "tests done at $((SECONDS-t0)) s"
wait; note "synth at $((SECONDS-t0)) s"
for r in 0 1; do
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    for v in one separate; do
      env POLYKV_GATED_Q_SEPARATE=$([ $v = separate ] && echo 1 || echo 0) timeout 60 $P bench -m $Q --device cuda -d 0 -p 512 -n 128 -r 3 \
        -ctk $1 -ctv $2 --bandwidth 4240 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$r,/" >> $OUT/ab.jsonl
      note "r$r q35 $1/$2 $v: $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
cd $OUT && tar cJf v10.tar.xz shard*.log bench.err && rm -f shard*.log
