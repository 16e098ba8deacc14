#!/usr/bin/env bash
# Call H49 (2026-12-07f): 1. every *Cuda* GPU test with the fixtures carried (the transformers goldens on the GPU; last
# run with fixtures before this session's and the last session's kernel changes), 8 shards, while synth makes
# llama-3.1-8b, gemma-3-4b (head size 256) and llama-3.2-1b (head size 64) in q4_0. 2. Head sizes other than 128 at
# depth, where decode takes the older kernels (256: the slots kernel; 64: the generic lanes8 kernel, no tensor-core
# one): decode at 0 and 32768 (-n 32 -r 3) and a timeline of one gemma-3-4b run at 32768 (tools/cuda_trace) for the
# attention's share of a token. 3. llama-3.1-8b at 131072 (-n 32 -r 2): f16/f16, q8_0/q8_0, q8_0/turbo3t,
# turbo3t/turbo3t (#9's "q8_0/turbo3t >= 1.5x our f16/f16" and "never slower than q8_0/q8_0" at that depth).
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/fixtures (docs/ and models/*.gguf moved aside to fit).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/traces
L=/tmp/l8b-q4_0.gguf G=/tmp/g3-4b-q4_0.gguf S=/tmp/l1b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 5 > $OUT/logs/synth-l8b.log 2>&1 &
[ -s $G ] || timeout 300 $P synth --shape gemma-3-4b --type q4_0 -o $G --threads 5 > $OUT/logs/synth-g3.log 2>&1 &
[ -s $S ] || timeout 300 $P synth --shape llama-3.2-1b --type q4_0 -o $S --threads 5 > $OUT/logs/synth-l1b.log 2>&1 &
gtest_shards 8 200 '*Cuda*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
pd() {  # pd TAG MODEL KV DEPTH N REPS [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-540} ]; then note "skip $1 (time)"; return; fi
  local tag=$1 m=$2 kv=$3 d=$4 n=$5 reps=$6; shift 6
  env "$@" timeout 120 $P bench -m $m --device cuda -r $reps --json -d $d -p 0 -n $n -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":1,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag ($((SECONDS-t0)) s): $(grep "\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for kv in f16/f16 q8_0/q8_0 q8_0/turbo3t; do
  pd g3-${kv/\//-}-d0 $G $kv 0 64 3
  pd g3-${kv/\//-}-d32768 $G $kv 32768 32 3
  pd l1b-${kv/\//-}-d32768 $S $kv 32768 32 3
done
tr() {  # tr TAG MODEL KV DEPTH
  if [ $((SECONDS-t0)) -gt ${LIMIT:-540} ]; then note "skip trace $1 (time)"; return; fi
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-$1.csv timeout 120 \
    $P bench -m $2 --device cuda -r 1 -d $4 -p 0 -n 24 -ctk ${3%/*} -ctv ${3#*/} > $OUT/logs/trace-$1.log 2>&1
  python3 scripts/cuda_trace_summary.py /tmp/trace-$1.csv --skip 4 > $OUT/traces/$1.summary.txt 2>&1
  note "trace $1 ($((SECONDS-t0)) s): $(grep -E "^period" $OUT/traces/$1.summary.txt)"
}
tr g3-q8_0-q8_0-d32768 $G q8_0/q8_0 32768
tr l1b-q8_0-q8_0-d32768 $S q8_0/q8_0 32768
for kv in q8_0/turbo3t q8_0/q8_0 f16/f16 turbo3t/turbo3t; do pd l8b-${kv/\//-}-d131072 $L $kv 131072 32 2; done
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
