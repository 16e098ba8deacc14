#!/usr/bin/env bash
# Call H36 (2026-12-07c): the fused one-token MoE FFN with x's activations from the norm (POLYKV_CUDA_MOE_XACTS),
# down's register cap for one wave (POLYKV_CUDA_MOE_DOWN_WAVE) and the routing's picks by ranks across a block
# (POLYKV_CUDA_MOE_RANK_ROUTE), then side by side with llama.cpp 3f545bec (built here from the carried source,
# never committed).
# 1. While llama.cpp builds and synth makes the two files: tests (MoeCuda.* incl. RouteByRanksGivesTheRoundsBits,
#    MoeV2Cuda, the MoE / gpt-oss fixture goldens, DeferredNormCuda).
# 2. (While llama.cpp still builds: the arms are interleaved, so both sides see the same CPUs.) Decode at depth 0, f16/f16, qwen3-30b-a3b and gpt-oss-20b q4_0: new / rank0 / xacts0 / wave0 / base (all three
#    off: main's path), 2 rounds interleaved (order reversed in round 2); gpt-oss also new with the routing always
#    inside gate+up (onewave0); qwen3 at q8_0/turbo3t new vs base.
# 3. (Once llama.cpp is built, CPUs quiet.) llama.cpp vs new: decode f16/f16 and q8_0/q8_0 on both files, 2 rounds.
# 4. Timelines of qwen3 (new, base) and Nsight Compute on gate+up (new) if time is left.
# Carry .gpucarry/build-gpu.tar.xz, .gpucarry/llama-src.tar.xz and .gpucarry/fixtures (qwen3moe + gptoss sets).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/logs/llama-build.log
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
[ -s $M ] || timeout 240 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 4 > $OUT/logs/synth-q3.log 2>&1 &
SQ=$!
[ -s $G ] || timeout 240 $P synth --shape gpt-oss-20b --type q4_0 -o $G --threads 4 > $OUT/logs/synth-gpt.log 2>&1 &
SG=$!
timeout 200 $T --gtest_filter='MoeCuda.*:*MoeV2Cuda*:*MoeModelCuda*:*GptOssCuda*:*Qwen3Moe*Cuda*:DeferredNormCuda.*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? ($((SECONDS-t0)) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests.log | head -20 >> $SUMMARY
wait $SQ $SG
note "synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG MODEL KV [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-300} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 m=$3 kv=$4; shift 4
  env "$@" timeout 60 $P bench -m $m --device cuda -r 3 --json -p 0 -n 128 -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
arm() {  # arm ROUND NAME MODEL KV
  local r=$1 a=$2 m=$3 kv=$4 b=$(basename $3 .gguf)-${4/\//-}
  case $a in
    new) pk $r new-$b $m $kv ;;
    rank0) pk $r rank0-$b $m $kv POLYKV_CUDA_MOE_RANK_ROUTE=0 ;;
    xacts0) pk $r xacts0-$b $m $kv POLYKV_CUDA_MOE_XACTS=0 ;;
    wave0) pk $r wave0-$b $m $kv POLYKV_CUDA_MOE_DOWN_WAVE=0 ;;
    onewave0) pk $r onewave0-$b $m $kv POLYKV_CUDA_MOE_ONE_WAVE=0 ;;
    base) pk $r base-$b $m $kv POLYKV_CUDA_MOE_XACTS=0 POLYKV_CUDA_MOE_DOWN_WAVE=0 POLYKV_CUDA_MOE_RANK_ROUTE=0 ;;
  esac
}
for r in 1 2; do
  q=(new rank0 xacts0 wave0 base); g=(new rank0 xacts0 onewave0 base); t=(new base)
  if [ $r = 2 ]; then q=(base wave0 xacts0 rank0 new); g=(base onewave0 xacts0 rank0 new); t=(base new); fi
  for a in "${q[@]}"; do arm $r $a $M f16/f16; done
  for a in "${g[@]}"; do arm $r $a $G f16/f16; done
  for a in "${t[@]}"; do arm $r $a $M q8_0/turbo3t; done
done
[ -n "$LLAMA_PID" ] && { wait $LLAMA_PID; note "llama.cpp build rc=$? ($((SECONDS-t0)) s)"; }
LB=$LLAMA/build/bin/llama-bench
if [ -x $LB ]; then
  lb() {  # lb ROUND TAG MODEL CTK CTV
    if [ $((SECONDS-t0)) -gt ${LIMIT2:-420} ]; then note "skip llama $2 r$1 (time)"; return; fi
    timeout 90 $LB -m $3 -ngl 99 -fa 1 -p 0 -n 128 -r 3 -ctk $4 -ctv $5 -o jsonl 2>>$OUT/logs/llama.err | sed "s/^{/{\"round\":$1,\"tag\":\"$2\",/" >> $OUT/llama.jsonl
    note "llama $2 r$1 ($((SECONDS-t0)) s): $(grep "\"round\":$1,\"tag\":\"$2\"" $OUT/llama.jsonl | grep -oE '"samples_ts": ?\[[^]]*\]')"
  }
  for r in 1 2; do
    for m in $M $G; do
      b=$(basename $m .gguf)
      lb $r llama-$b-f16 $m f16 f16; arm $r new $m f16/f16
      lb $r llama-$b-q8 $m q8_0 q8_0; arm $r new $m q8_0/q8_0
    done
  done
else
  note "llama-bench not built"; tail -20 $OUT/logs/llama-build.log >> $SUMMARY
fi
mkdir -p $OUT/traces
for a in new base; do  # timelines of one qwen3 token stream (tools/cuda_trace), if time is left
  [ $((SECONDS-t0)) -lt ${TRACE_LIMIT:-420} ] || break
  ev=(); [ $a = base ] && ev=(POLYKV_CUDA_MOE_XACTS=0 POLYKV_CUDA_MOE_DOWN_WAVE=0 POLYKV_CUDA_MOE_RANK_ROUTE=0)
  env "${ev[@]}" CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 60 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 >/dev/null 2>>$OUT/logs/polykv.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-q3-$a.summary.txt 2>&1
  note "trace $a: $(grep -E '^period' $OUT/traces/trace-q3-$a.summary.txt)"
done
if [ $((SECONDS-t0)) -lt ${NCU_LIMIT:-430} ]; then
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
  timeout 40 $NCU --graph-profiling node -k regex:moe_gate_up_act_kernel --launch-skip 60 --launch-count 1 --set full \
    $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 4 -r 1 > $OUT/ncu-gate-up.txt 2>&1
  note "ncu gate+up rc=$? ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|DRAM Throughput|Executed Instructions|Registers Per Thread) ' $OUT/ncu-gate-up.txt | head -4 | awk '{$1=$1};1' | paste -sd'|')"
  xz -9 $OUT/ncu-gate-up.txt
fi
xz -9 $OUT/logs/llama-build.log 2>/dev/null
note "done ($((SECONDS-t0)) s)"
