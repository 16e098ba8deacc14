#!/usr/bin/env bash
# polykv against llama.cpp per x86 ISA (issue #12, docs/ISA.md): decode, pp512 and decode at a KV
# depth, on the same GGUF files and threads, flash attention on, every cell as one run per repetition,
# interleaved (rep -> ISA -> weights -> test -> both engines, the engine order alternating per rep).
# polykv's ISA is forced with POLYKV_ISA; llama.cpp runs a build for that ISA (LLAMA_<ISA>).
# Each run appends one JSON line to OUT/runs.jsonl (with the 1-minute load average); then
# bench/isa_compare_summary.py prints the ratio table (median and min–max of the per-rep ratios).
#
# Usage: bench/isa_compare.sh OUT_DIR
# Environment (defaults in brackets):
#   POLYKV [build/polykv]   LLAMA_AVX512 [/tmp/llama.cpp/build/bin/llama-bench, native build]
#   LLAMA_AVX2 [/tmp/llama.cpp/build-avx2/bin/llama-bench, GGML_NATIVE=OFF AVX2/FMA/F16C/AVX-VNNI]
#   MODELS [/tmp/isa-models: llama-3.2-1b-<weights>.gguf]   ISAS ["avx2 avx512"]
#   WEIGHTS ["q4_0 q8_0 q4_K_M"]   TESTS ["tg pp512 depth"]   REPS [3]   THREADS [2]   N_GEN [64]
#   DEPTH [4096]   DEPTH_WEIGHTS [q4_0]: the weights of the depth tests, which compare polykv
#   q8_0/turbo3t with llama.cpp q8_0/q8_0 and f16/f16.
set -euo pipefail
out=${1:?usage: bench/isa_compare.sh OUT_DIR}
POLYKV=${POLYKV:-build/polykv}
LLAMA_AVX512=${LLAMA_AVX512:-/tmp/llama.cpp/build/bin/llama-bench}
LLAMA_AVX2=${LLAMA_AVX2:-/tmp/llama.cpp/build-avx2/bin/llama-bench}
MODELS=${MODELS:-/tmp/isa-models}
ISAS=${ISAS:-avx2 avx512} WEIGHTS=${WEIGHTS:-q4_0 q8_0 q4_K_M} TESTS=${TESTS:-tg pp512 depth}
REPS=${REPS:-3} THREADS=${THREADS:-2} N_GEN=${N_GEN:-64} DEPTH=${DEPTH:-4096} DEPTH_WEIGHTS=${DEPTH_WEIGHTS:-q4_0}
mkdir -p "$out"
runs=$out/runs.jsonl

load1() { cut -d' ' -f1 /proc/loadavg; }

# One JSON line: engine, isa, weights, test, kv, tok/s, load, rep, command.
emit() {
  python3 -c 'import json,sys; k=["engine","isa","weights","test","kv","tok_s","load1","rep","command"]
v=sys.argv[1:]; d=dict(zip(k,v)); d["tok_s"]=float(d["tok_s"]); d["load1"]=float(d["load1"]); d["rep"]=int(d["rep"])
print(json.dumps(d))' "$@" >>"$runs"
}

# polykv: ISA WEIGHTS TEST KV REP
run_polykv() {
  local isa=$1 w=$2 test=$3 kv=$4 rep=$5 args
  case $test in
    tg) args="-p 0 -n $N_GEN" ;;
    pp512) args="-p 512 -n 0" ;;
    depth) args="-p 0 -n $N_GEN -d $DEPTH" ;;
  esac
  local cmd="POLYKV_ISA=$isa $POLYKV bench -m $MODELS/llama-3.2-1b-$w.gguf $args -t $THREADS -r 1 -ctk ${kv%/*} -ctv ${kv#*/} --bandwidth 1 --json"
  local load; load=$(load1)
  local j; j=$(env POLYKV_ISA="$isa" "$POLYKV" bench -m "$MODELS/llama-3.2-1b-$w.gguf" $args -t "$THREADS" -r 1 \
    -ctk "${kv%/*}" -ctv "${kv#*/}" --bandwidth 1 --json 2>/dev/null)
  local got; got=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["matmul_isa"], j["attention_isa"])' "$j")
  [[ $got == "$isa $isa" ]] || { echo "polykv ran $got, not $isa" >&2; exit 1; }
  local tps; tps=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["prefill_tok_s"] if sys.argv[2]=="pp512" else j["decode_tok_s"])' "$j" "$test")
  emit polykv "$isa" "$w" "$test" "$kv" "$tps" "$load" "$rep" "$cmd"
}

# llama.cpp: ISA WEIGHTS TEST KV REP
run_llama() {
  local isa=$1 w=$2 test=$3 kv=$4 rep=$5 args bin
  bin=LLAMA_${isa^^}; bin=${!bin}
  case $test in
    tg) args="-p 0 -n $N_GEN" ;;
    pp512) args="-p 512 -n 0" ;;
    depth) args="-p 0 -n $N_GEN -d $DEPTH" ;;
  esac
  local cmd="$bin -m $MODELS/llama-3.2-1b-$w.gguf $args -t $THREADS -r 1 -fa 1 -ctk ${kv%/*} -ctv ${kv#*/} -o json"
  local load; load=$(load1)
  local tps; tps=$($cmd 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])')
  emit llama.cpp "$isa" "$w" "$test" "$kv" "$tps" "$load" "$rep" "$cmd"
}

{
  echo "{\"date\": \"$(date -u +%FT%TZ)\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\","
  echo " \"nproc\": $(nproc), \"uptime\": \"$(uptime)\", \"polykv_commit\": \"$(git rev-parse --short HEAD)\","
  echo " \"llama_cpp_commit\": \"$(git -C "$(dirname "$LLAMA_AVX512")/../.." rev-parse --short HEAD 2>/dev/null || echo unknown)\","
  echo " \"avx_vnni\": $(grep -qw avx_vnni /proc/cpuinfo && echo true || echo false),"
  echo " \"isas\": \"$ISAS\", \"weights\": \"$WEIGHTS\", \"tests\": \"$TESTS\", \"reps\": $REPS, \"threads\": $THREADS,"
  echo " \"n_gen\": $N_GEN, \"depth\": $DEPTH, \"depth_weights\": \"$DEPTH_WEIGHTS\"}"
} >"$out/meta.json"

for rep in $(seq 1 "$REPS"); do
  for isa in $ISAS; do
    for test in $TESTS; do
      if [[ $test == depth ]]; then ws=$DEPTH_WEIGHTS; else ws=$WEIGHTS; fi
      for w in $ws; do
        echo "rep $rep $isa $w $test (load $(load1))" >&2
        if [[ $test == depth ]]; then
          pairs=("polykv q8_0/turbo3t" "llama q8_0/q8_0" "llama f16/f16")
          ((rep % 2)) || pairs=("llama f16/f16" "llama q8_0/q8_0" "polykv q8_0/turbo3t")
        else
          pairs=("polykv f16/f16" "llama f16/f16")
          ((rep % 2)) || pairs=("llama f16/f16" "polykv f16/f16")
        fi
        for p in "${pairs[@]}"; do
          run_"${p% *}" "$isa" "$w" "$test" "${p#* }" "$rep"
        done
      done
    done
  done
done
python3 "$(dirname "$0")/isa_compare_summary.py" "$runs" | tee "$out/summary.md"
