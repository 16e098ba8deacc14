#!/usr/bin/env bash
# 2026-12-06 call H6 = 2026-12-05d's callH5 (never ran) plus q4_0 and q5_K traces: (1) why prefill of the split
# k-quants is slower than on ggml rows (H4: q5_K 15.8k -> 10.7k tok/s at -p 512; q4_K 10.8k against q4_0's 16.0k):
# CUPTI traces of a 512-token prefill (kernel totals) for q4_K split / rows, q4_0 split, q5_K split; (2) whether
# q5_K's greedy text (H4: different with the split layout) differs only through the paths that exist for split
# weights alone: deferred norms (POLYKV_CUDA_DEFER_NORM=0) and, for a 40-id prompt, the quantized mat-mul
# (POLYKV_CUDA_MMQ=0); (3) prefill tok/s, q4_K / q5_K split against ggml rows (POLYKV_CUDA_MATVEC=old) and
# split with the quantized mat-mul up to 512 columns (POLYKV_CUDA_MMQ_MAX=512). No model carried; this build.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
for ty in q4_0 q4_K q5_K; do
  timeout 200 $P synth --shape llama-3.1-8b --type $ty -o /tmp/l8-$ty.gguf --threads 5 >>$OUT/synth.log 2>&1 &
done
wait
note "synth done at $((SECONDS-t0)) s"
trace() {  # trace NAME TYPE ENV...: kernel totals of one 512-token prefill
  local name=$1 ty=$2; shift 2
  env "$@" CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/tr-$name.csv timeout 90 \
    $P bench -m /tmp/l8-$ty.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p 512 -n 1 -r 1 >>$OUT/run.log 2>&1
  python3 scripts/cuda_trace_totals.py /tmp/tr-$name.csv --top 14 > $OUT/trace-$name.txt 2>&1
  note "trace $name: $(head -2 $OUT/trace-$name.txt | paste -sd' ')"
}
trace q4_K-split q4_K POLYKV_X=1
trace q4_K-rows q4_K POLYKV_CUDA_MATVEC=old
trace q4_0-split q4_0 POLYKV_X=1
trace q5_K-split q5_K POLYKV_CUDA_SPLIT_Q5K=1
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
greedy "40 ids, DEFER_NORM=0 MMQ=0" $(seq -s, 100 139) POLYKV_CUDA_DEFER_NORM=0 POLYKV_CUDA_MMQ=0
pb() {  # pb ARM ROUND TYPE ENV...
  local arm=$1 r=$2 ty=$3; shift 3
  env "$@" timeout 90 $P bench -m /tmp/l8-$ty.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p 512 -n 16 -r 3 --bandwidth 3350 --json \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"$arm\",\"round\":$r,\"wtype\":\"$ty\",/" >>$OUT/pp.jsonl
  note "$ty $arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/pp.jsonl | grep -oE '"(prefill)_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  pb split $r q4_K POLYKV_X=1
  pb rows $r q4_K POLYKV_CUDA_MATVEC=old
  pb split-mmq512 $r q4_K POLYKV_CUDA_MMQ_MAX=512
  pb split $r q4_0 POLYKV_X=1
  pb split $r q5_K POLYKV_CUDA_SPLIT_Q5K=1
  pb rows $r q5_K POLYKV_CUDA_SPLIT_Q5K=0
done
cd $OUT && tar cJf h6-logs.tar.xz synth.log run.log bench.err
note "done at $((SECONDS-t0)) s"
