#!/usr/bin/env bash
# 2026-12-02 (seventh session) call N2, main c6e8b38 (N1's turbo3t runs faulted on the store's table touch, removed):
# (1) every CUDA GPU test but the emulation (8 shards); (2) timelines at 32768, q8_0/turbo3t: the merge with its O rows
# prefetched (default), without (POLYKV_CUDA_MERGE_PREFETCH=0), and the attention not started early (late);
# (3) decode at 32768 interleaved, 2 rounds: q8_0/turbo3t default / nopf / late, q8_0/q8_0 default; (4) 131072:
# q8_0/turbo3t default / late, q8_0/q8_0, f16/f16; (5) depth 0: q8_0/turbo3t radix 4 (default) vs =radix2, 2 rounds,
# then one round of the five KV pairs.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
gtest_shards 8 150 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*'
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
trace() {  # name env...
  local name=$1; shift
  env "$@" CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/t.csv timeout 40 $P bench -m $M $B -p 0 -n 32 -d 32768 -r 1 $KV >/dev/null 2>>$OUT/bench.err
  python3 scripts/cuda_trace_summary.py $OUT/t.csv --skip 4 > $OUT/trace-d32768-$name.summary.txt 2>&1
  rm -f $OUT/t.csv
  note "trace $name: $(grep -E '^period' $OUT/trace-d32768-$name.summary.txt | cut -c1-60)"
  grep -E '^(kv_store|device::)' $OUT/trace-d32768-$name.summary.txt >> $SUMMARY
}
KV="-ctk q8_0 -ctv turbo3t"
trace q8_0-turbo3t-default
trace q8_0-turbo3t-nopf POLYKV_CUDA_MERGE_PREFETCH=0
trace q8_0-turbo3t-late POLYKV_CUDA_ATTN_EARLY=0
run() {  # file depth reps label env...
  local f=$1 d=$2 r=$3 label=$4; shift 4
  env "$@" timeout 60 $P bench -m $M $B -p 0 -n 32 -d $d -r $r $KV 2>>$OUT/bench.err |
    grep '^{' | sed "s/^{/{\"variant\":\"$label\",/" >> $OUT/$f
  note "$f $KV $label ($((SECONDS-t0)) s): $(tail -1 $OUT/$f | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
}
for round in 1 2; do
  KV="-ctk q8_0 -ctv turbo3t"
  run d32768.jsonl 32768 2 default
  run d32768.jsonl 32768 2 nopf POLYKV_CUDA_MERGE_PREFETCH=0
  run d32768.jsonl 32768 2 late POLYKV_CUDA_ATTN_EARLY=0
  KV="-ctk q8_0 -ctv q8_0"
  run d32768.jsonl 32768 2 default
done
KV="-ctk q8_0 -ctv turbo3t"
run d131072.jsonl 131072 1 default
run d131072.jsonl 131072 1 late POLYKV_CUDA_ATTN_EARLY=0
KV="-ctk q8_0 -ctv q8_0"; run d131072.jsonl 131072 1 default
KV="-ctk f16 -ctv f16"; run d131072.jsonl 131072 1 default
KV="-ctk q8_0 -ctv turbo3t"
for round in 1 2; do
  for v in default radix2; do
    e=; [ $v = radix2 ] && e=POLYKV_CUDA_KV_VITERBI=radix2
    env $e timeout 40 $P bench -m $M $B -p 512 -n 128 -r 3 $KV 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",/" >> $OUT/d0.jsonl
    note "d0 $KV $v ($((SECONDS-t0)) s): $(tail -1 $OUT/d0.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
  done
done
for kv in "f16 f16" "q8_0 q8_0" "q8_0 turbo3" "turbo3t turbo3t"; do
  set -- $kv
  timeout 40 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err | grep '^{' | sed 's/^{/{"variant":"default",/' >> $OUT/d0.jsonl
  note "d0 $1/$2 ($((SECONDS-t0)) s): $(tail -1 $OUT/d0.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz shard*.log bench.err && rm -f shard*.log bench.err
