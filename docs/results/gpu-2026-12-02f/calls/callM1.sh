#!/usr/bin/env bash
# 2026-12-02 (sixth session) call M1: the register forms of kv_store's turbo / trellis encoders (radix-4 Viterbi,
# shuffle trees) against the array forms (POLYKV_CUDA_KV_VITERBI=old, same binary, same bytes):
# (1) GPU tests of the store and of the models that use it, both encoders; (2) Nsight Compute duration of one
# decode-row kv_store, both encoders; (3) an in-graph timeline at depth 0, q8_0/turbo3t; (4) decode at depth 0,
# interleaved, 2 rounds x 3 reps: q8_0/turbo3t, q8_0/turbo3, turbo3t/turbo3t new vs old, q8_0/q8_0 as the bar;
# (5) depth 32768 q8_0/turbo3t new vs old; (6) the prefill store speed test, both; (7) POLYKV_CUDA_GRAPH_EXECS=2 (two
# instances of each step graph, launched in turn) against 1: the graph / generate tests with 2, decode at depth 0
# interleaved (f16/f16, q8_0/turbo3t), and a host-API timeline with each.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
F='*KvStore*:*KvEncode*:FuseDecCuda.*:*ModelCuda*:GraphKv*:GenerateCuda.*:EngineCuda*:*SpecInvarianceCuda*:-*DISABLED*:*Speed*'
gtest_shards 4 150 "$F"
mv $OUT/shard0.log $OUT/new-shard0.log; mv $OUT/shard1.log $OUT/new-shard1.log; mv $OUT/shard2.log $OUT/new-shard2.log; mv $OUT/shard3.log $OUT/new-shard3.log
note "---- the same store tests with POLYKV_CUDA_KV_VITERBI=old"
POLYKV_CUDA_KV_VITERBI=old timeout 120 $T --gtest_filter='*KvStore*:-*Speed*' --gtest_color=no > $OUT/old-store.log 2>&1
note "old store tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/old-store.log | paste -sd' ')"
for v in new old; do
  e=; [ $v = old ] && e=old
  POLYKV_CUDA_KV_VITERBI=$e timeout 120 $T --gtest_filter='CudaKvStore.PrefillSpeed' --gtest_also_run_disabled_tests > $OUT/prefill-$v.log 2>&1
  note "prefill store $v:"; grep -A14 'GPU ns/row' $OUT/prefill-$v.log >> $SUMMARY
done
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
# (2) one decode-row kv_store under Nsight Compute (launches 40..42: past the 16-row prompt's 32 layers)
for v in new old; do
  e=; [ $v = old ] && e=old
  for kv in "q8_0 turbo3t" "q8_0 turbo3" "q8_0 q8_0"; do
    set -- $kv
    POLYKV_CUDA_KV_VITERBI=$e timeout 120 ncu --kernel-name regex:kv_store_kernel --launch-skip 40 --launch-count 3 \
      --section SpeedOfLight $P bench -m $M --device cuda -p 16 -n 4 -r 1 -ctk $1 -ctv $2 --bandwidth 4240 > $OUT/ncu-$v-$1-$2.txt 2>&1
    note "ncu kv_store $v $1/$2: $(grep -E '^\s+Duration' $OUT/ncu-$v-$1-$2.txt | awk '{print $3}' | paste -sd' ') us"
  done
done
# (3) timeline, depth 0, q8_0/turbo3t, new and old
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
for v in new old; do
  e=; [ $v = old ] && e=old
  POLYKV_CUDA_KV_VITERBI=$e CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d0-$v.csv timeout 120 $P bench -m $M $B -p 512 -n 64 -r 1 \
    -ctk q8_0 -ctv turbo3t >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
  python3 scripts/cuda_trace_summary.py $OUT/trace-d0-$v.csv --skip 4 > $OUT/trace-d0-$v.summary.txt 2>&1
  note "trace d0 $v ($((SECONDS-t0)) s): $(grep -iE 'kv_store' $OUT/trace-d0-$v.summary.txt | head -3 | paste -sd' ')"
done
# (4) decode at depth 0, interleaved
for round in 1 2; do
  for kv in "q8_0 turbo3t" "q8_0 turbo3" "turbo3t turbo3t" "q8_0 q8_0"; do
    set -- $kv
    for v in new old; do
      [ "$2" = q8_0 ] && [ $v = old ] && continue
      e=; [ $v = old ] && e=old
      POLYKV_CUDA_KV_VITERBI=$e timeout 60 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err |
        grep '^{' | sed "s/^{/{\"round\":$round,\"encoder\":\"$v\",/" >> $OUT/d0-store.jsonl
      note "r$round d0 $1/$2 $v ($((SECONDS-t0)) s): $(tail -1 $OUT/d0-store.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
# (5) depth 32768
for v in new old q8; do
  e=; [ $v = old ] && e=old
  V=turbo3t; [ $v = q8 ] && V=q8_0
  POLYKV_CUDA_KV_VITERBI=$e timeout 80 $P bench -m $M $B -p 0 -n 32 -d 32768 -r 2 -ctk q8_0 -ctv $V 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"round\":1,\"encoder\":\"$v\",/" >> $OUT/d32768-store.jsonl
  note "d32768 q8_0/$V $v ($((SECONDS-t0)) s): $(tail -1 $OUT/d32768-store.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
done
# (7) two graph instances
POLYKV_CUDA_GRAPH_EXECS=2 timeout 150 $T --gtest_filter='GenerateCuda.*:*ModelCuda*:GraphKv*:GraphRows*:EngineCuda*:-*DISABLED*' \
  --gtest_color=no > $OUT/execs2-tests.log 2>&1
note "graph execs 2 tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/execs2-tests.log | paste -sd' ')"
for round in 1 2; do
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    for x in 2 1; do
      POLYKV_CUDA_GRAPH_EXECS=$x timeout 60 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err |
        grep '^{' | sed "s/^{/{\"round\":$round,\"graph_execs\":$x,/" >> $OUT/d0-execs.jsonl
      note "r$round d0 $1/$2 execs=$x ($((SECONDS-t0)) s): $(tail -1 $OUT/d0-execs.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
for x in 1 2; do
  POLYKV_CUDA_GRAPH_EXECS=$x POLYKV_TRACE_API=1 CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-api-execs$x.csv timeout 120 $P bench -m $M $B \
    -p 512 -n 64 -r 1 -ctk f16 -ctv f16 >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
  python3 scripts/cuda_trace_summary.py $OUT/trace-api-execs$x.csv --skip 4 > $OUT/trace-api-execs$x.summary.txt 2>&1
  note "api trace execs=$x: $(grep -iE 'period|gap' $OUT/trace-api-execs$x.summary.txt | head -4 | paste -sd' ')"
done
note "done at $((SECONDS-t0)) s"
tail -3 $OUT/bench.err >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz *shard*.log old-store.log execs2-tests.log prefill-*.log ncu-*.txt trace.err bench.err trace-bench.jsonl 2>/dev/null
xz -9 trace-*.csv; tar cf traces.tar trace-*.csv.xz; rm -f *shard*.log old-store.log execs2-tests.log prefill-*.log ncu-*.txt trace.err bench.err trace-*.csv.xz trace-bench.jsonl
