#!/usr/bin/env bash
# Written 2026-12-06 for the next session's device (this session's device time ran out after H7; H8 and H9 never ran).
# Build: main after "ggml rows' prefill tile staged, opt-in". One binary, no model carried:
# (0) every GPU correctness test ('*Cuda*:*GPU*', 4 shards), among them MatmulCuda.DequantTileRowsStagedSameBits
#     (the ggml rows' staged tile kernel, opt-in POLYKV_CUDA_DEQUANT_ROWS=staged, against the old one, every type);
# (1) MatmulCudaBench.DISABLED_DequantTileRows (GB/s per type, old / staged);
# (2) prefill of ggml-row types, old / staged tile kernel: q3_K and q5_0 pp512, 2 rounds interleaved;
# (3) the prefill tile's bound (POLYKV_CUDA_PREFILL_TILE_MB 64 = default / 32 / 16), q4_K pp512 and pp4096;
# (4) q5_K (split by default since 2026-12-06) against POLYKV_CUDA_SPLIT_Q5K=0: bench -p 512 -n 128 -r 3, 2 rounds.
# If (0) and (2) pass and (2) is faster: make the staged rows kernel the default (matmul_cuda_prefill.cu, rows_staged).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
BW=3350; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && BW=4800
for ty in q3_K q5_0 q4_K q5_K; do
  timeout 300 $P synth --shape llama-3.1-8b --type $ty -o /tmp/l8-$ty.gguf --threads 4 >>$OUT/synth.log 2>&1 &
done
gtest_shards 4 240 '*Cuda*:*GPU*:-*DISABLED*'
timeout 60 $T --gtest_filter='MatmulCudaBench.DISABLED_DequantTileRows' --gtest_also_run_disabled_tests --gtest_color=no \
  > /tmp/rows_bench.txt 2>&1
note "rows dequant bench rc=$? at $((SECONDS-t0)) s"
grep -E "^(type|[a-z]+[0-9])" /tmp/rows_bench.txt >> $OUT/summary.txt
note "synth done at $((SECONDS-t0)) s: $(ls -la /tmp/l8-*.gguf | awk '{print $5}' | paste -sd' ')"
pb() {  # pb ARM ROUND TYPE P N ENV...
  local arm=$1 r=$2 ty=$3 p=$4 n=$5; shift 5
  if [ $((SECONDS-t0)) -gt 540 ]; then note "skip $ty p$p $arm r$r (time)"; return; fi
  env "$@" timeout 90 $P bench -m /tmp/l8-$ty.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p $p -n $n -r 3 --bandwidth $BW --json \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"$arm\",\"round\":$r,\"wtype\":\"$ty\",/" >>$OUT/pp.jsonl
  note "$ty p$p $arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/pp.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | tr -d '"' | paste -sd' ')"
}
for r in 1 2; do
  for ty in q3_K q5_0; do
    pb rows-old $r $ty 512 1 POLYKV_X=1
    pb rows-staged $r $ty 512 1 POLYKV_CUDA_DEQUANT_ROWS=staged
  done
done
for p in 512 4096; do for mb in 64 32 16; do pb tile$mb 1 q4_K $p 1 POLYKV_CUDA_PREFILL_TILE_MB=$mb; done; done
for r in 1 2; do
  pb split $r q5_K 512 128 POLYKV_X=1
  pb rows $r q5_K 512 128 POLYKV_CUDA_SPLIT_Q5K=0
done
cd $OUT && tar cJf h10-logs.tar.xz synth.log bench.err shard*.log && rm -f synth.log bench.err shard*.log
note "done at $((SECONDS-t0)) s"
