#!/usr/bin/env bash
# Call H29b (warm machine after H29): the x_smem effect with the early down off; base vs noearly on gpt-oss.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
xz -dc .gpucarry/polykv-base.xz > build-gpu/polykv-base && chmod +x build-gpu/polykv-base
B=build-gpu/polykv-base
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
ls -la $M $G >> $SUMMARY 2>&1
[ -s $M ] || { note "no model on this machine"; exit 0; }
mkdir -p $OUT/traces
arm_bin() { case $1 in base) echo $B ;; *) echo $P ;; esac; }
arm_env() { case $1 in noearly) echo POLYKV_CUDA_MOE_DOWN_EARLY=0 ;; plain) echo POLYKV_CUDA_MOE_DOWN_EARLY=0 POLYKV_CUDA_MATVEC_X_SMEM=0 ;; *) echo POLYKV_ARM=$1 ;; esac; }
pk() {  # pk ARM ROUND TAG MODEL ARGS...
  local arm=$1 r=$2 tag=$3 m=$4; shift 4
  if [ $((SECONDS-t0)) -gt ${LIMIT:-200} ]; then note "skip $tag r$r (time)"; return; fi
  env $(arm_env $arm) timeout 60 $(arm_bin $arm) bench -m $m --device cuda -r 3 --json --bandwidth 4800 "$@" 2>> $OUT/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
env $(arm_env plain) CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
  timeout 60 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 >/dev/null 2>>$OUT/bench.err
python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-moe-plain.summary.txt 2>&1
note "trace plain: $(grep -E '^period' $OUT/traces/trace-d0-moe-plain.summary.txt)"
for r in 3 4; do
  arms="base noearly plain"; [ $r = 4 ] && arms="plain noearly base"
  for arm in $arms; do pk $arm $r $arm-q3moe-tg-f16-f16 $M -p 0 -n 128 -ctk f16 -ctv f16; done
  for arm in base noearly; do pk $arm $r $arm-gptoss-tg-f16-f16 $G -p 0 -n 128 -ctk f16 -ctv f16; done
  for arm in base noearly; do pk $arm $r $arm-q3moe-tg-q8_0-turbo3t $M -p 0 -n 128 -ctk q8_0 -ctv turbo3t; done
done
note "done at $((SECONDS-t0)) s"
