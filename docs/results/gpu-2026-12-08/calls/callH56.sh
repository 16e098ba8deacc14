#!/usr/bin/env bash
# Call H56 (2026-12-08; not run: no device was lent after the build): f16/f16 on the tensor-core decode kernel
# (54d27cc; off by default until this call passes: POLYKV_CUDA_ATTN_TC_F16=1 turns it on). 1. while synth makes gemma-3-4b,
# llama-3.2-1b and llama-3.1-8b q4_0: every CUDA attention GPU test and the model-level ones that reach the decode
# kernels (ModelDepthCuda now with f16/f16, ModelCuda, SpecInvarianceCuda), 8 shards. 2. one layer, every mode
# (DISABLED_DecodeModesBench: f16/f16 at head sizes 256 / 128 / 64 now on the tensor-core kernel in mode mma).
# 3. f16/f16 decode at depth 32768, POLYKV_CUDA_ATTN_TC_F16=1 against the default (the kernels before: slots at 256,
# generic lanes8 at 64, the pairs kernel at 128), 2 rounds interleaved, order reversed in round 2; gemma-3-4b, llama-3.2-1b,
# llama-3.1-8b. 4. time left: llama-3.1-8b at 131072, f16/f16 and q8_0/turbo3t (#9's 1.5x ratio).
# Prepare: scripts/gpu-carry.sh pack docs/results/gpu-2026-12-08/calls/callH56.sh --no-draft; run `bash call.sh`
# carrying .gpucarry/build-gpu.tar.xz; then scripts/gpu-carry.sh restore.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
G=/tmp/g3-4b-q4_0.gguf S=/tmp/l1b-q4_0.gguf L=/tmp/l8b-q4_0.gguf
[ -s $G ] || timeout 300 $P synth --shape gemma-3-4b --type q4_0 -o $G --threads 3 > $OUT/logs/synth-g3.log 2>&1 &
[ -s $S ] || timeout 300 $P synth --shape llama-3.2-1b --type q4_0 -o $S --threads 2 > $OUT/logs/synth-l1b.log 2>&1 &
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 5 > $OUT/logs/synth-l8b.log 2>&1 &
export POLYKV_CUDA_ATTN_TC_F16=1  # the tests' processes (the kernel-level ones set it themselves)
gtest_shards 8 150 'CudaAttention*:*ModelDepthCuda*:*ModelCuda*:SpecInvarianceCuda.*:FuseDecCuda.*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
timeout 120 $T --gtest_also_run_disabled_tests --gtest_filter='CudaAttentionDecode8.DISABLED_DecodeModesBench' \
  > $OUT/decode-modes-bench.txt 2>&1
note "modes bench rc=$? ($((SECONDS-t0)) s)"
grep '^f16' $OUT/decode-modes-bench.txt >> $SUMMARY
unset POLYKV_CUDA_ATTN_TC_F16
LIMIT=400
for r in 1 2; do
  for m in g3:$G l1b:$S l8b:$L; do
    name=${m%%:*} f=${m#*:}
    if [ $r = 1 ]; then
      bench_tagged $r new-$name-f16-f16-d32768 $P $f f16/f16 32768 32 3 POLYKV_CUDA_ATTN_TC_F16=1
      bench_tagged $r old-$name-f16-f16-d32768 $P $f f16/f16 32768 32 3
    else
      bench_tagged $r old-$name-f16-f16-d32768 $P $f f16/f16 32768 32 3
      bench_tagged $r new-$name-f16-f16-d32768 $P $f f16/f16 32768 32 3 POLYKV_CUDA_ATTN_TC_F16=1
    fi
  done
done
LIMIT=430 bench_tagged 1 at-l8b-f16-f16-d131072 $P $L f16/f16 131072 32 2 POLYKV_CUDA_ATTN_TC_F16=1
LIMIT=460 bench_tagged 1 at-l8b-q8_0-turbo3t-d131072 $P $L q8_0/turbo3t 131072 32 2
tar cJf $OUT/logs.tar.xz -C $OUT logs $(cd $OUT && ls shard*.log) && rm -rf $OUT/logs $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
