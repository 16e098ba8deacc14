#!/usr/bin/env bash
# 2026-12-05d call H5 (TRIM=1: trimmed to little device time, one prefill round and no 40-id greedy run): (1) whether q5_K's greedy text (H4: different with the split layout) differs only through the
# paths that exist for split weights alone: deferred norms (POLYKV_CUDA_DEFER_NORM=0 turns them off) and, for a
# 40-id prompt, the quantized mat-mul (POLYKV_CUDA_MMQ=0); (2) why prefill of the split k-quants is slower than on
# ggml rows (H4: q5_K 15.8k -> 10.7k tok/s at -p 512): q4_K / q5_K split against POLYKV_CUDA_MATVEC=old (ggml rows),
# split with the quantized mat-mul up to 512 columns (POLYKV_CUDA_MMQ_MAX=512); (3) a CUPTI trace of each. No model carried; this build.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
timeout 200 $P synth --shape llama-3.1-8b --type q5_K -o /tmp/l8-q5_K.gguf --threads 8 >>$OUT/synth.log 2>&1 &
timeout 200 $P synth --shape llama-3.1-8b --type q4_K -o /tmp/l8-q4_K.gguf --threads 8 >>$OUT/synth.log 2>&1 &
wait
note "synth done at $((SECONDS-t0)) s"
# (3) where a 512-token prefill's time goes, q4_K split against ggml rows (CUPTI trace, kernel totals).
for arm in split rows; do
  e=POLYKV_X=1; [ $arm = rows ] && e=POLYKV_CUDA_MATVEC=old
  env $e CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/tr-$arm.csv timeout 90 \
    $P bench -m /tmp/l8-q4_K.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p 512 -n 1 -r 1 >>$OUT/run.log 2>&1
  python3 scripts/cuda_trace_totals.py /tmp/tr-$arm.csv --top 12 > $OUT/trace-q4_K-$arm.txt 2>&1
  note "trace $arm: $(head -3 $OUT/trace-q4_K-$arm.txt | paste -sd' ')"
done
greedy() {  # greedy NAME IDS ENV...   (split off / on under ENV)
  local name=$1 ids=$2; shift 2
  for s in 0 1; do
    env POLYKV_CUDA_SPLIT_Q5K=$s "$@" timeout 90 $P run -m /tmp/l8-q5_K.gguf --ids $ids -n 48 --temp 0 \
      --cache-type-k f16 --cache-type-v f16 >/tmp/g-$s.txt 2>>$OUT/run.log
  done
  if cmp -s /tmp/g-0.txt /tmp/g-1.txt; then r=same; else r=DIFFERENT; fi
  note "greedy q5_K $name, split off / on: $r ($(stat -c %s /tmp/g-1.txt) bytes)"
}
greedy "3 ids, defaults" 17,300,5000 POLYKV_X=1
greedy "3 ids, DEFER_NORM=0" 17,300,5000 POLYKV_CUDA_DEFER_NORM=0
if [ -z "${TRIM:-}" ]; then
  greedy "40 ids, DEFER_NORM=0 MMQ=0" $(seq -s, 100 139) POLYKV_CUDA_DEFER_NORM=0 POLYKV_CUDA_MMQ=0
fi
pb() {  # pb ARM ROUND TYPE ENV...
  local arm=$1 r=$2 ty=$3; shift 3
  env "$@" timeout 90 $P bench -m /tmp/l8-$ty.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p 512 -n 16 -r 3 --json \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"$arm\",\"round\":$r,\"wtype\":\"$ty\",/" >>$OUT/pp.jsonl
  note "$ty $arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/pp.jsonl | grep -oE '"(prefill)_tok_s_reps":\[[^]]*\]')"
}
rounds=2; [ -n "${TRIM:-}" ] && rounds=1
for r in $(seq 1 $rounds); do
  pb split $r q4_K POLYKV_X=1
  pb rows $r q4_K POLYKV_CUDA_MATVEC=old
  pb split-mmq512 $r q4_K POLYKV_CUDA_MMQ_MAX=512
  pb split $r q5_K POLYKV_CUDA_SPLIT_Q5K=1
  pb rows $r q5_K POLYKV_CUDA_SPLIT_Q5K=0
done
cd $OUT && tar cJf h5-logs.tar.xz synth.log run.log bench.err
note "done at $((SECONDS-t0)) s"
