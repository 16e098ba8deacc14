#!/usr/bin/env bash
# 2026-12-06b call H11 (issue #9). Build: main e76c764 (the ggml rows' staged tile on by default), models/ carried,
# llama.cpp 3f545bec's source as .gpucarry/llama-src.tar.xz (never committed).
# (0) every GPU test ('*Cuda*:*GPU*', 4 shards) with the models this time (H10 ran without them), while
#     llama.cpp builds on the CPUs;
# (1) bench without --bandwidth (CudaBackend::measure_bandwidth has not run on a GPU yet);
# (2) Nsight Compute of the q8_0/turbo3t KV store at depth 0 (SASS source counters with stall samples: where
#     the trellis Viterbi waits), exported as CSV;
# (3) side by side with llama.cpp on this card: synth llama-3.1-8b q4_0, q4_K, q8_0; decode at depth 0 (f16/f16),
#     pp512, pp4096; interleaved, -r 3 each, as many rounds as time allows (the X calls' method).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
mkdir -p $OUT/logs
SYN=()
for ty in q4_0 q4_K q8_0; do
  timeout 300 $P synth --shape llama-3.1-8b --type $ty -o /tmp/l8-$ty.gguf --threads 4 >>$OUT/logs/synth.log 2>&1 &
  SYN+=($!)
done
gtest_shards 4 280 '*Cuda*:*GPU*:-*DISABLED*'
wait "${SYN[@]}"
note "synth done at $((SECONDS-t0)) s: $(ls -la /tmp/l8-*.gguf | awk '{print $5}' | paste -sd' ')"
# (1)
timeout 60 $P bench -m /tmp/l8-q4_0.gguf --device cuda -p 64 -n 16 -r 1 > $OUT/logs/bench-nobw.txt 2>&1
note "bench without --bandwidth rc=$?: $(grep -E 'bandwidth|floor' $OUT/logs/bench-nobw.txt | head -3 | paste -sd' ')"
# (2)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 120 $NCU --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  --import-source yes --clock-control none --cache-control none -k 'regex:kv_store' --launch-skip 40 --launch-count 1 \
  --export /tmp/kv -f $P bench -m /tmp/l8-q4_0.gguf --device cuda -p 16 -n 3 -r 1 -ctk q8_0 -ctv turbo3t --bandwidth 3350 \
  > $OUT/logs/ncu.log 2>&1
note "ncu rc=$? at $((SECONDS-t0)) s"
$NCU --import /tmp/kv.ncu-rep --page source --csv --print-source sass > /tmp/kv-sass.csv 2>/dev/null
$NCU --import /tmp/kv.ncu-rep --page details --csv > $OUT/logs/kv-details.csv 2>/dev/null
xz -9 -T4 -c /tmp/kv-sass.csv > $OUT/kv-sass.csv.xz
# (3)
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; tail -20 $OUT/llama-build.log >> $SUMMARY; }
note "llama.cpp ready at $((SECONDS-t0)) s"
ll() {  # ll ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  [ -x $LB ] || return
  if [ $((SECONDS-t0)) -gt 560 ]; then note "skip llama $tag r$r (time)"; return; fi
  timeout 60 $LB -m $M -ngl 99 -fa 1 -r 3 -o jsonl "$@" 2>> $OUT/logs/llama.err | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/llama.jsonl
  note "llama $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]' | paste -sd' ')"
}
pk() {  # pk ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  if [ $((SECONDS-t0)) -gt 560 ]; then note "skip polykv $tag r$r (time)"; return; fi
  timeout 60 $P bench -m $M --device cuda -r 3 --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "polykv $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2; do
  for ty in q4_0 q4_K q8_0; do
    M=/tmp/l8-$ty.gguf
    ll $r $ty-pp512 -p 512 -n 0 -ctk f16 -ctv f16
    pk $r $ty-pp512 -p 512 -n 1 -ctk f16 -ctv f16
    ll $r $ty-pp4096 -p 4096 -n 0 -ctk f16 -ctv f16
    pk $r $ty-pp4096 -p 4096 -n 1 -ctk f16 -ctv f16
    ll $r $ty-tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
    pk $r $ty-tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
  done
done
cd $OUT && cp llama-build.log logs/ 2>/dev/null; tar cJf h11-logs.tar.xz logs shard*.log && rm -rf logs shard*.log llama-build.log
note "done at $((SECONDS-t0)) s"
