#!/usr/bin/env bash
# NOT RUN: no machine could be started (replaced by the smaller callH47.sh, which did not run either).
# Call H46 (2026-12-07e): the spill-free lanes8 kernels (lean kernels without the self-encoded rows for the pairs that
# never self-encode; the self-encoding ones with their types as constants) and where #9's decode figures stand at
# depth. 1. The attention, model and engine GPU tests in 8 shards (embedded, MTP-head and draft models carried), while
# synth makes llama-3.1-8b q4_0. 2. One run each (not interleaved: the pairs are not A/B arms), depth 32768 (-n 32
# -r 3) and 131072 (-n 32 -r 2), the issue's KV pairs plus q4_0/q4_0, as time allows. The depth-0 A/B is call H47.
# Carry .gpucarry/build-gpu.tar.xz.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
cuobjdump --dump-resource-usage build-gpu/polykv 2>&1 | grep -E "Function|REG" | paste - - | grep -E "decode_tc_kernel|decode8_kernelILi128ELi4E" > $OUT/regs.txt
L=/tmp/l8b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 6 > $OUT/logs/synth-l8b.log 2>&1 &
gtest_shards 8 150 'CudaAttention*:ModelCuda*:ModelFusedCuda*:FuseDecCuda*:SpecInvarianceCuda*:GenerateCuda*:EngineCuda*:CudaKvStore*:CudaGraph*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG KV DEPTH N REPS [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-545} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 kv=$3 d=$4 n=$5 reps=$6; shift 6
  env "$@" timeout 100 $P bench -m $L --device cuda -r $reps --json -d $d -p 0 -n $n -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
pk 1 at-q8_0-turbo3-d0 q8_0/turbo3 0 128 3
for kv in q8_0/q8_0 q8_0/turbo3t q8_0/turbo3 turbo3t/turbo3t q4_0/q4_0 f16/f16; do pk 1 at-${kv/\//-}-d32768 $kv 32768 32 3; done
for kv in q8_0/turbo3t q8_0/turbo3 q4_0/q4_0 f16/f16; do pk 1 at-${kv/\//-}-d131072 $kv 131072 32 2; done
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
