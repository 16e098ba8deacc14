#!/usr/bin/env bash
# 2026-12-05d call H4 (written for the next session's device: none was lent on 2026-12-05d): the q5_K split layout
# (Split<DecQ5_K>: qs 16 B a unit, the fifth bits 4 B a unit, KQuantHead's 16-byte head; opt-in with
# POLYKV_CUDA_SPLIT_Q5K=1 until this call has validated it). One binary (this build), no model carried:
# (0) the kernel-level CUDA tests with the opt-in on (the split mat-vec = the stream kernel bit for bit, the
#     quantized mat-mul, MoE v2 incl. a q5_K case), and MatvecSplitCudaBench (q5_K rows per matrix);
# (1) the same greedy text with and without the opt-in (synth llama-3.1-8b q5_K, 3 and 40 prompt ids);
# (2) speed, interleaved: bench -p 512 -n 128 -r 3, depth 0, f16/f16 and q8_0/turbo3t, 3 rounds, opt-in off / on.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
timeout 300 $P synth --shape llama-3.1-8b --type q5_K -o /tmp/l8-q5_K.gguf --threads 12 >>$OUT/synth.log 2>&1 &
POLYKV_CUDA_SPLIT_Q5K=1 gtest_shards 4 150 'MatvecSplitCuda.*:MmqCuda.*:MatmulCuda.*:MatmulPartsCuda.*:MoeCuda.*:*MoeV2Cuda.*:*MoeExpertsCuda.*:CudaBackendTest.*:OpsFusedCuda.*:-*DISABLED*'
POLYKV_CUDA_SPLIT_Q5K=1 timeout 60 $T --gtest_filter='MatvecSplitCudaBench.DISABLED_OldVsSplit' --gtest_also_run_disabled_tests \
  --gtest_color=no > $OUT/matvec_bench.txt 2>&1
note "matvec bench rc=$? at $((SECONDS-t0)) s"
grep -E "^(type|q5_K|device)" $OUT/matvec_bench.txt >> $OUT/summary.txt
wait
note "synth done at $((SECONDS-t0)) s: $(ls -la /tmp/l8-*.gguf | awk '{print $5, $9}' | paste -sd' ')"
for ids in 17,300,5000 $(seq -s, 100 139); do
  n=$(echo $ids | tr ',' '\n' | wc -l)
  for s in 0 1; do
    POLYKV_CUDA_SPLIT_Q5K=$s timeout 90 $P run -m /tmp/l8-q5_K.gguf --ids $ids -n 48 --temp 0 --cache-type-k f16 \
      --cache-type-v f16 >/tmp/run-q5k-$n-$s.txt 2>>$OUT/run.log
  done
  if cmp -s /tmp/run-q5k-$n-0.txt /tmp/run-q5k-$n-1.txt; then r=same; else r=DIFFERENT; fi
  note "greedy run q5_K, $n prompt ids, 48 tokens, split off / on: $r ($(stat -c %s /tmp/run-q5k-$n-1.txt) bytes)"
done
bench() {  # bench SPLIT ROUND K V
  local s=$1 r=$2 k=$3 v=$4
  if [ $((SECONDS-t0)) -gt 520 ]; then note "skip q5_K $k/$v split=$s r$r (time)"; return; fi
  env POLYKV_CUDA_SPLIT_Q5K=$s timeout 90 $P bench -m /tmp/l8-q5_K.gguf --device cuda -ctk $k -ctv $v -d 0 -p 512 -n 128 \
    -r 3 --bandwidth 4240 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"split_q5k\":$s,\"round\":$r,/" >>$OUT/ab.jsonl
  note "q5_K $k/$v split=$s r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then o="0 1"; else o="1 0"; fi
  for kv in "f16 f16" "q8_0 turbo3t"; do for s in $o; do bench $s $r $kv; done; done
done
cd $OUT && tar cJf h4-logs.tar.xz shard*.log synth.log run.log bench.err && rm -f shard*.log
note "done at $((SECONDS-t0)) s"
