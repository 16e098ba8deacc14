#!/usr/bin/env bash
# One polykv binary under two environments (a kernel switch's end-to-end effect), or two binaries
# (BIN_A, BIN_B: a change's), interleaved: per
# repetition and case, side A then side B, the order alternating per repetition. A case is
# "LABEL|GGUF|bench arguments"; each run is one `polykv bench ... -r 1 --json`, and the figure is
# decode tok/s when the arguments generate tokens (-n > 0), else prefill tok/s. One JSON line per run
# in OUT/runs.jsonl (with the bench JSON's kernels, the load average and the command);
# OUT/summary.md: per case, median and min-max of each side and of the per-repetition ratios B/A.
#
# Usage: bench/env_ab.sh OUT_DIR
# Environment: BIN [build/polykv]   BIN_A, BIN_B [BIN]   ENV_A ["POLYKV_ATTN_Q8=0"]   ENV_B [""]   REPS [3]   THREADS [2]
#   CASES [required: newline-separated cases]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/env_ab.sh OUT_DIR}
BIN=${BIN:-build/polykv} ENV_A=${ENV_A-POLYKV_ATTN_Q8=0} ENV_B=${ENV_B-} REPS=${REPS:-3} THREADS=${THREADS:-2}
CASES=${CASES:?CASES: newline-separated LABEL|GGUF|ARGS}
BIN_A=${BIN_A:-$BIN} BIN_B=${BIN_B:-$BIN}
mkdir -p "$out"
runs=$out/runs.jsonl
: >"$runs"
{
  echo "{\"date\": \"$(date -u +%FT%TZ)\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\","
  echo " \"nproc\": $(nproc), \"commit\": \"$(git rev-parse --short HEAD)\", \"env_a\": \"$ENV_A\", \"env_b\": \"$ENV_B\","
  echo " \"bin_a\": \"$BIN_A\", \"bin_b\": \"$BIN_B\","
  echo " \"reps\": $REPS, \"threads\": $THREADS}"
} >"$out/meta.json"

run() {  # SIDE ENV LABEL GGUF ARGS REP
  local side=$1 envs=$2 label=$3 gguf=$4 args=$5 rep=$6 load j bin=$BIN_A
  [ "$side" = B ] && bin=$BIN_B
  load=$(cut -d' ' -f1 /proc/loadavg)
  # shellcheck disable=SC2086
  j=$(env $envs "$bin" bench -m "$gguf" $args -t "$THREADS" -r 1 --json 2>/dev/null)
  python3 -c 'import json,sys
j=json.loads(sys.argv[1]); side,label,rep,load,cmd=sys.argv[2:]
t=j["decode_tok_s"] if j.get("n_gen",0) else j["prefill_tok_s"]
print(json.dumps({"side":side,"case":label,"rep":int(rep),"tok_s":t,"load1":float(load),"command":cmd,
                  "matmul_isa":j.get("matmul_isa"),"attention_isa":j.get("attention_isa"),
                  "attention_k_scores":j.get("attention_k_scores")}))' \
    "$j" "$side" "$label" "$rep" "$load" "$envs $bin bench -m $gguf $args -t $THREADS -r 1 --json" >>"$runs"
}

for rep in $(seq 1 "$REPS"); do
  while IFS='|' read -r label gguf args; do
    [ -n "$label" ] || continue
    if [ $((rep % 2)) = 1 ]; then
      run A "$ENV_A" "$label" "$gguf" "$args" "$rep"
      run B "$ENV_B" "$label" "$gguf" "$args" "$rep"
    else
      run B "$ENV_B" "$label" "$gguf" "$args" "$rep"
      run A "$ENV_A" "$label" "$gguf" "$args" "$rep"
    fi
    echo "rep $rep $label done ($(uptime | sed 's/.*load/load/'))" >&2
  done <<<"$CASES"
done

python3 - "$runs" "$ENV_A" "$ENV_B" "$BIN_A" "$BIN_B" >"$out/summary.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"A = `{sys.argv[2] or '(no environment)'} {sys.argv[4]}`, B = `{sys.argv[3] or '(no environment)'} {sys.argv[5]}`; tok/s median (min-max); B/A per repetition\n")
print("| case | A tok/s | B tok/s | B/A median (min-max) |")
print("|---|---|---|---|")
cases = list(dict.fromkeys(r["case"] for r in rows))
for c in cases:
    a = {r["rep"]: r["tok_s"] for r in rows if r["case"] == c and r["side"] == "A"}
    b = {r["rep"]: r["tok_s"] for r in rows if r["case"] == c and r["side"] == "B"}
    ratios = [b[k] / a[k] for k in a if k in b]
    f = lambda v: "%.1f (%.1f-%.1f)" % (statistics.median(v), min(v), max(v))
    print(f"| {c} | {f(list(a.values()))} | {f(list(b.values()))} | **%.3f** (%.3f-%.3f) |" % (
        statistics.median(ratios), min(ratios), max(ratios)))
PY
cat "$out/summary.md"
