#!/usr/bin/env bash
# Call H42 (2026-12-07d): where #9's decode targets stand on the H200 the issue names, with main of this session
# (the last H200 figures were 2026-12-04f's X1-X2). Synth llama-3.1-8b q4_0; polykv only (llama.cpp's figures of
# X1-X2 stand). Depth 0 f16/f16, q8_0/q8_0, q8_0/turbo3t (-n 128 -r 3); depth 32768 the same three (-n 32 -r 2);
# depth 131072 q8_0/turbo3t, q8_0/q8_0 and f16/f16 (-n 16 -r 2), as time allows. --bandwidth 4240 (the H200's
# measured copy bandwidth, GB/s) for the floor fields. Carry .gpucarry/build-gpu.tar.xz.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/l8b-q4_0.gguf
mkdir -p $OUT/logs
[ -s $M ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 12 > $OUT/logs/synth.log 2>&1
note "synth done ($((SECONDS-t0)) s)"
pk() {  # pk TAG ARGS...
  if [ $((SECONDS-t0)) -gt ${LIMIT:-480} ]; then note "skip $1 (time)"; return; fi
  local tag=$1; shift
  timeout 150 $P bench -m $M --device cuda --json --bandwidth 4240 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":1,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag ($((SECONDS-t0)) s): $(grep "\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]|"floor[a-z_]*":[0-9.]*' | paste -sd' ')"
}
for kv in f16/f16 q8_0/q8_0 q8_0/turbo3t; do pk d0-${kv/\//-} -p 0 -n 128 -r 3 -ctk ${kv%/*} -ctv ${kv#*/}; done
for kv in f16/f16 q8_0/q8_0 q8_0/turbo3t; do pk d32k-${kv/\//-} -d 32768 -p 0 -n 32 -r 2 -ctk ${kv%/*} -ctv ${kv#*/}; done
for kv in q8_0/turbo3t q8_0/q8_0 f16/f16; do pk d128k-${kv/\//-} -d 131072 -p 0 -n 16 -r 2 -ctk ${kv%/*} -ctv ${kv#*/}; done
note "done ($((SECONDS-t0)) s)"
