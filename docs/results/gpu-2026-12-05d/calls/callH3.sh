#!/usr/bin/env bash
# 2026-12-05d call H3 (H1 and H2 in one call: device starts were scarce; the embedded model stayed behind for the
# 64 MiB carry limit, so only the kernel-level CUDA tests run): the q4_K split head re-ordered for the lanes.
# (0) the kernel-level CUDA tests (split mat-vec, mma/wgmma mat-mul, MoE v1/v2, backend ops) while synth runs, and
#     MatvecSplitCudaBench (per-matrix: the stream kernel on ggml rows against the split kernel);
# then H2's steps: main's polykv (.gpucarry/polykv-old.xz, built from 1643077) against this build's:
# (1) the same greedy text: `polykv run --temp 0 -n 48` after 3 prompt ids (mat-vecs of 3 columns, then 1) and 40
#     (the quantized mat-mul), KV f16/f16, both binaries;
# (2) speed, interleaved run by run: bench -p 512 -n 128 -r 3, depth 0, q4_K f16/f16 (3 rounds) and q8_0/turbo3t
#     (2 rounds) with three arms: old, new, and new with POLYKV_CUDA_SPLIT_U=3; q4_0 f16/f16 old and new (1 round).
source scripts/gpu-lib.sh; call_setup
xz -dc .gpucarry/polykv-old.xz > build-gpu/polykv-old && chmod +x build-gpu/polykv-old
t0=$SECONDS
timeout 240 $P synth --shape llama-3.1-8b --type q4_K -o /tmp/l8-q4_K.gguf --threads 8 >>$OUT/synth.log 2>&1 &
timeout 240 $P synth --shape llama-3.1-8b --type q4_0 -o /tmp/l8-q4_0.gguf --threads 4 >>$OUT/synth.log 2>&1 &
gtest_shards 4 150 'MatvecSplitCuda.*:MmqCuda.*:MatmulCuda.*:MatmulPartsCuda.*:MoeCuda.*:*MoeV2Cuda.*:*MoeExpertsCuda.*:CudaBackendTest.*:OpsFusedCuda.*:MxfpCuda.*:-*DISABLED*'
timeout 60 $T --gtest_filter='MatvecSplitCudaBench.DISABLED_OldVsSplit' --gtest_also_run_disabled_tests --gtest_color=no \
  > $OUT/matvec_bench.txt 2>&1
note "matvec bench rc=$? at $((SECONDS-t0)) s"
grep -E "^(type|q4_K|q4_0|q6_K|q8_0|device)" $OUT/matvec_bench.txt >> $OUT/summary.txt
wait
note "synth done at $((SECONDS-t0)) s: $(ls -la /tmp/l8-*.gguf | awk '{print $5, $9}' | paste -sd' ')"
ids40=$(seq -s, 100 139)
for ty in q4_K q4_0; do
  for ids in 17,300,5000 $ids40; do
    [ $ty = q4_0 ] && [ ${#ids} -gt 20 ] && continue
    n=$(echo $ids | tr ',' '\n' | wc -l)
    for b in old new; do
      bin=$P; [ $b = old ] && bin=build-gpu/polykv-old
      timeout 90 $bin run -m /tmp/l8-$ty.gguf --ids $ids -n 48 --temp 0 --cache-type-k f16 --cache-type-v f16 \
        >/tmp/run-$ty-$n-$b.txt 2>>$OUT/run.log
    done
    if cmp -s /tmp/run-$ty-$n-old.txt /tmp/run-$ty-$n-new.txt; then r=same; else r=DIFFERENT; fi
    note "greedy run $ty, $n prompt ids, 48 tokens: $r ($(stat -c %s /tmp/run-$ty-$n-new.txt) bytes of output)"
  done
done
bench() {  # bench ARM ROUND TYPE K V   (ARM: old = main's binary; new; u3 = new with POLYKV_CUDA_SPLIT_U=3)
  local b=$1 r=$2 ty=$3 k=$4 v=$5 bin=$P u=
  [ $b = old ] && bin=build-gpu/polykv-old
  [ $b = u3 ] && u=3
  if [ $((SECONDS-t0)) -gt 500 ]; then note "skip $ty $k/$v $b r$r (time)"; return; fi
  env POLYKV_CUDA_SPLIT_U=$u timeout 90 $bin bench -m /tmp/l8-$ty.gguf --device cuda -ctk $k -ctv $v -d 0 -p 512 -n 128 -r 3 \
    --bandwidth 4240 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"$b\",\"round\":$r,\"wtype\":\"$ty\",/" >>$OUT/ab.jsonl
  note "$ty $k/$v $b r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then o="old new u3"; else o="u3 new old"; fi
  for b in $o; do bench $b $r q4_K f16 f16; done
  [ $r -le 2 ] && for b in $o; do bench $b $r q4_K q8_0 turbo3t; done
done
for b in old new; do bench $b 1 q4_0 f16 f16; done
cd $OUT && tar cJf h3-logs.tar.xz shard*.log synth.log run.log bench.err && rm -f shard*.log
note "done at $((SECONDS-t0)) s"
