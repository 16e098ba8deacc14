#!/usr/bin/env bash
# Call H29c (warm machine after H29b): gpt-oss-20b q4_0 timelines, base / noearly / plain.
source scripts/gpu-lib.sh; call_setup
xz -dc .gpucarry/polykv-base.xz > build-gpu/polykv-base && chmod +x build-gpu/polykv-base
B=build-gpu/polykv-base G=/tmp/gptoss-q4_0.gguf
[ -s $G ] || { note "no model on this machine"; exit 0; }
mkdir -p $OUT/traces
for arm in base noearly plain; do
  bin=$P; [ $arm = base ] && bin=$B
  e=POLYKV_ARM=$arm; [ $arm = noearly ] && e=POLYKV_CUDA_MOE_DOWN_EARLY=0
  [ $arm = plain ] && e="POLYKV_CUDA_MOE_DOWN_EARLY=0 POLYKV_CUDA_MATVEC_X_SMEM=0"
  env $e CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 60 $bin bench -m $G --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 >/dev/null 2>>$OUT/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-gptoss-$arm.summary.txt 2>&1
  note "trace gptoss $arm: $(grep -E '^period' $OUT/traces/trace-d0-gptoss-$arm.summary.txt)"
done
