#!/usr/bin/env bash
# 2026-12-05d call H2: main's polykv (carried as .gpucarry/polykv-old.xz, built from 1643077) against this build's
# (the q4_K split head re-ordered for the lanes), on synth llama-3.1-8b q4_K and q4_0 made here:
# (1) the same greedy text: `polykv run --temp 0 -n 48` after 3 prompt ids (mat-vecs of 3 columns, then 1) and 40 (the
#     quantized mat-mul), KV f16/f16, both binaries (the `logits` command is CPU only);
# (2) speed, interleaved run by run: bench -p 512 -n 128 -r 3, depth 0, q4_K f16/f16 (3 rounds) and q8_0/turbo3t
#     (2 rounds) with three arms: old, new, and new with POLYKV_CUDA_SPLIT_U=3 (3 steps a chunk for q4_K's 1-2
#     column mat-vecs instead of 2); q4_0 f16/f16 old and new (2 rounds: its kernel changed only in how a lane finds
#     its part).
source scripts/gpu-lib.sh; call_setup
xz -dc .gpucarry/polykv-old.xz > build-gpu/polykv-old && chmod +x build-gpu/polykv-old
t0=$SECONDS
timeout 240 $P synth --shape llama-3.1-8b --type q4_K -o /tmp/l8-q4_K.gguf --threads 10 >>$OUT/synth.log 2>&1 &
timeout 240 $P synth --shape llama-3.1-8b --type q4_0 -o /tmp/l8-q4_0.gguf --threads 6 >>$OUT/synth.log 2>&1 &
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
for r in 1 2; do for b in old new; do bench $b $r q4_0 f16 f16; done; done
cd $OUT && tar cJf h2-logs.tar.xz synth.log run.log bench.err
note "done at $((SECONDS-t0)) s"
