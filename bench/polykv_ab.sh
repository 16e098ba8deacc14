#!/usr/bin/env bash
# Two polykv binaries against each other (a kernel change's end-to-end effect), interleaved: per
# repetition and test, both binaries one after the other, the order alternating per repetition, on
# one GGUF, one forced ISA, the same threads. One JSON line per run in OUT/runs.jsonl (tok/s, the
# 1-minute load average, the command); OUT/summary.md: median and min–max of the per-rep ratios B/A.
# On a machine others share, the ratio is what counts (both sides see the same load on average).
#
# Usage: bench/polykv_ab.sh OUT_DIR
# Environment (defaults in brackets): A, B [required: the two polykv binaries]   MODEL [required]
#   ISA [avx2]   TESTS ["tg pp512"]   REPS [3]   THREADS [2]   N_GEN [64]
set -euo pipefail
out=${1:?usage: bench/polykv_ab.sh OUT_DIR}
A=${A:?A: polykv binary before} B=${B:?B: polykv binary after} MODEL=${MODEL:?MODEL: a GGUF}
ISA=${ISA:-avx2} TESTS=${TESTS:-tg pp512} REPS=${REPS:-3} THREADS=${THREADS:-2} N_GEN=${N_GEN:-64}
mkdir -p "$out"
runs=$out/runs.jsonl
{
  echo "{\"date\": \"$(date -u +%FT%TZ)\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\","
  echo " \"nproc\": $(nproc), \"uptime\": \"$(uptime)\", \"a\": \"$A\", \"b\": \"$B\", \"model\": \"$MODEL\","
  echo " \"isa\": \"$ISA\", \"tests\": \"$TESTS\", \"reps\": $REPS, \"threads\": $THREADS, \"n_gen\": $N_GEN}"
} >"$out/meta.json"

run() {  # SIDE BINARY TEST REP
  local side=$1 bin=$2 test=$3 rep=$4 args
  case $test in
    tg) args="-p 0 -n $N_GEN" ;;
    pp512) args="-p 512 -n 0" ;;
    *) echo "unknown test $test" >&2; exit 2 ;;
  esac
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  local cmd="POLYKV_ISA=$ISA $bin bench -m $MODEL $args -t $THREADS -r 1 --json"
  local j; j=$(env POLYKV_ISA="$ISA" "$bin" bench -m "$MODEL" $args -t "$THREADS" -r 1 --json 2>/dev/null)
  python3 -c 'import json,sys
j=json.loads(sys.argv[1]); side,test,rep,load,cmd,isa=sys.argv[2:]
assert j["matmul_isa"]==isa, "ran "+j["matmul_isa"]
t=j["prefill_tok_s"] if test=="pp512" else j["decode_tok_s"]
print(json.dumps({"side":side,"test":test,"rep":int(rep),"tok_s":t,"load1":float(load),"command":cmd}))' \
    "$j" "$side" "$test" "$rep" "$load" "$cmd" "$ISA" >>"$runs"
}

for rep in $(seq 1 "$REPS"); do
  for test in $TESTS; do
    echo "rep $rep $test (load $(cut -d' ' -f1 /proc/loadavg))"
    if ((rep % 2)); then run A "$A" "$test" "$rep"; run B "$B" "$test" "$rep"
    else run B "$B" "$test" "$rep"; run A "$A" "$test" "$rep"; fi
  done
done

python3 - "$runs" <<'PY' | tee "$out/summary.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| test | A tok/s | B tok/s | B / A | reps | load1 |")
print("|---|---|---|---|---|---|")
for test in dict.fromkeys(r["test"] for r in rows):
    by = {}
    for r in rows:
        if r["test"] == test: by.setdefault(r["rep"], {})[r["side"]] = r
    reps = [v for v in by.values() if "A" in v and "B" in v]
    a = [v["A"]["tok_s"] for v in reps]; b = [v["B"]["tok_s"] for v in reps]
    ratio = [y / x for x, y in zip(a, b)]; load = [v[s]["load1"] for v in reps for s in "AB"]
    f = lambda xs, d=1: f"{statistics.median(xs):.{d}f} ({min(xs):.{d}f}–{max(xs):.{d}f})"
    print(f"| {test} | {f(a)} | {f(b)} | {f(ratio, 2)} | {len(reps)} | {f(load)} |")
PY
