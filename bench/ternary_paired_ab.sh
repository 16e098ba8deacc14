#!/usr/bin/env bash
# Ternary (and q4_0 / q8_0 / tq2_0) mat-vec streaming from DRAM against a read pass measured just before it,
# two builds alternated (bench/ternary_bench.cpp --paired): per type, the median (min..max) over all rounds of
# GB/s / the same round's read GB/s, for A and B, and B's median GB/s over A's. 1 token, 14336 x 4096, 2
# threads, ~384 MiB of copies per type. One command (~2-3 min at ROUNDS=4 K=5):
#   bench/ternary_paired_ab.sh LIB_A LIB_B OUT.json
# LIB_A / LIB_B: libpolykv_lib.a of the two versions (e.g. a copy of build/libpolykv_lib.a before a change,
# and the one after). Environment: ROUNDS (alternations, 4), K (paired rounds per run, 5), TYPES
# (q8_0,q4_0,tq2_0,tq1_0,ptq1_0), ENV_A / ENV_B (environment assignments for A's / B's runs, e.g.
# ENV_A=POLYKV_TQ_LUT=0 with the same library twice: an A/B inside one build). Needs the sources of this
# checkout for the benchmark itself.
set -euo pipefail
cd "$(dirname "$0")/.."
lib_a=$1 lib_b=$2 out=$3
ROUNDS=${ROUNDS:-4} K=${K:-5} TYPES=${TYPES:-q8_0,q4_0,tq2_0,tq1_0,ptq1_0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for v in a b; do
  lib=$lib_a; [ "$v" = b ] && lib=$lib_b
  g++ -std=c++20 -O2 -Isrc bench/ternary_bench.cpp "$lib" $(pkg-config --libs libpcre2-8) -lpthread -o "$work/tb_$v"
done
load_before=$(uptime)
for ((r = 0; r < ROUNDS; ++r)); do
  for v in a b; do
    envs=${ENV_A:-}; [ "$v" = b ] && envs=${ENV_B:-}
    env $envs "$work/tb_$v" --types "$TYPES" --paired "$K" >"$work/$v.$r.json"
  done
done
load_after=$(uptime)
mkdir -p "$(dirname "$out")"
LOAD_BEFORE="$load_before" LOAD_AFTER="$load_after" LIB_A="$lib_a" LIB_B="$lib_b" \
  CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
  COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)" \
  /usr/bin/python3 - "$work" "$ROUNDS" "$out" <<'PY'
import datetime, json, os, statistics, sys
work, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = {v: [json.load(open(f"{work}/{v}.{r}.json")) for r in range(rounds)] for v in "ab"}
cols = runs["a"][0]["columns"]
doc = {"date_utc": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z", "commit": os.environ["COMMIT"],
       "cpu": os.environ["CPU"], "lib_a": os.environ["LIB_A"], "lib_b": os.environ["LIB_B"],
       "env_a": os.environ.get("ENV_A", ""), "env_b": os.environ.get("ENV_B", ""),
       "matmul_isa": runs["a"][0]["matmul_isa"], "threads": runs["a"][0]["threads"],
       "uptime_before": os.environ["LOAD_BEFORE"].strip(), "uptime_after": os.environ["LOAD_AFTER"].strip(),
       "columns": cols, "rounds": {v: [row for run in runs[v] for row in run["rounds"]] for v in "ab"}, "summary": {}}
def stat(xs): return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3), "max": round(max(xs), 3)}
for i, name in enumerate(cols):
    s = {}
    for v in "ab":
        rows = doc["rounds"][v]
        s[f"gbs_{v}"] = stat([row[i] for row in rows])
        if i: s[f"frac_read_{v}"] = stat([row[i] / row[0] for row in rows])
    s["b_over_a"] = round(s["gbs_b"]["median"] / s["gbs_a"]["median"], 3)
    doc["summary"][name] = s
open(out, "w").write(json.dumps(doc, indent=1) + "\n")
for name, s in doc["summary"].items():
    fr = "".join(f"  frac {v} {s[f'frac_read_{v}']['median']:.3f} ({s[f'frac_read_{v}']['min']:.3f}..{s[f'frac_read_{v}']['max']:.3f})"
                 for v in "ab" if f"frac_read_{v}" in s)
    print(f"{name}: GB/s a {s['gbs_a']['median']:.1f} b {s['gbs_b']['median']:.1f} (b/a {s['b_over_a']:.3f}){fr}")
print("wrote", out)
PY
