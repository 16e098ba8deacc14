#!/usr/bin/env bash
# A/B of the ternary kernels: the kernel sources at BASE (a git revision, default bea188e: before the
# state kernels) against the working tree, same library otherwise, interleaved runs of
# bench/ternary_bench.cpp (A B A B ...). Writes $OUT (default docs/results/ternary-2026-12-01b/ab.json):
# per variant, type and batch size the one-core compute ceiling (hot_core, thread CPU time: usable on
# a loaded machine) and the DRAM GB/s with its fraction of the bandwidth measured in the same run,
# each as median / min / max over the runs, plus new/base ratios of the medians.
#   bench/ternary_ab.sh [runs=3] [extra bench options, e.g. --mib 512 --tokens 2,4,8]
# POLYKV_ISA=avx2 forces an ISA for both. Needs build/libpolykv_lib.a (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-bea188e}
OUT=${OUT:-docs/results/ternary-2026-12-01b/ab.json}
runs=${1:-3}
shift || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/backend/cpu" "$(dirname "$OUT")"
for f in ternary_kernels_x86.h ternary_kernels_avx2.cpp ternary_kernels_avx512.cpp ternary_kernels_scalar.cpp; do
  git show "$BASE:src/backend/cpu/$f" > "$tmp/src/backend/cpu/$f"
done
avx2="-mavx2 -mfma -mf16c"
avx512="$avx2 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni"
for v in base new; do
  root=$([ $v = base ] && echo "$tmp/src" || echo src)
  g++ -std=c++20 -O2 -I"$root" -Isrc -c "$root/backend/cpu/ternary_kernels_scalar.cpp" -o "$tmp/$v-scalar.o"
  g++ -std=c++20 -O2 -I"$root" -Isrc $avx2 -c "$root/backend/cpu/ternary_kernels_avx2.cpp" -o "$tmp/$v-avx2.o"
  # shellcheck disable=SC2086
  g++ -std=c++20 -O2 -I"$root" -Isrc $avx512 -c "$root/backend/cpu/ternary_kernels_avx512.cpp" -o "$tmp/$v-avx512.o"
  g++ -std=c++20 -O2 -Isrc bench/ternary_bench.cpp "$tmp/$v-"*.o build/libpolykv_lib.a \
    $(pkg-config --libs libpcre2-8) -lpthread -o "$tmp/bench-$v"
done
load_before=$(uptime)
for r in $(seq "$runs"); do
  for v in base new; do "$tmp/bench-$v" --threads 2 --reps 1 "$@" > "$tmp/$v-$r.json"; done
done
load_after=$(uptime)
LOAD_BEFORE="$load_before" LOAD_AFTER="$load_after" BASE_REV="$BASE" \
  COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)" \
  /usr/bin/python3 - "$OUT" "$tmp" "$runs" <<'PY'
import json, os, statistics, sys, datetime
out, tmp, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def stats(v): return {"median": statistics.median(v), "min": min(v), "max": max(v)}
res, raw = {}, {}
for v in ("base", "new"):
    docs = [json.load(open(f"{tmp}/{v}-{r}.json")) for r in range(1, runs + 1)]
    raw[v] = docs
    per = {}
    for name in docs[0]["hot_core_gbs"]:
        d = {}
        for nt in docs[0]["hot_core_gbs"][name]:
            d[f"hot_core_gbs_{nt}tok"] = stats([x["hot_core_gbs"][name][nt] for x in docs])
        for key in docs[0]["reps"][0]["types"][name]:
            if key.startswith(("gbs_", "frac_bw_")):
                d[key] = stats([x["reps"][0]["types"][name][key] for x in docs])
        per[name] = d
    per["bandwidth_gbs"] = stats([x["reps"][0]["bandwidth_gbs"] for x in docs])
    res[v] = per
ratio = {n: {k: res["new"][n][k]["median"] / res["base"][n][k]["median"] for k in res["new"][n]}
         for n in res["new"] if n != "bandwidth_gbs"}
doc = {"date_utc": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
       "base": os.environ["BASE_REV"], "commit": os.environ["COMMIT"], "isa": raw["new"][0]["matmul_isa"],
       "runs": runs, "uptime_before": os.environ["LOAD_BEFORE"].strip(),
       "uptime_after": os.environ["LOAD_AFTER"].strip(), "summary": res, "ratio_new_over_base": ratio, "raw": raw}
open(out, "w").write(json.dumps(doc, indent=1) + "\n")
for n, r in ratio.items():
    print(n, " ".join(f"{k}: {res['base'][n][k]['median']:.2f}->{res['new'][n][k]['median']:.2f} ({v:.2f}x)"
                      for k, v in r.items() if k.startswith(("hot", "frac"))))
print("bandwidth (median) base", res["base"]["bandwidth_gbs"]["median"], "new", res["new"]["bandwidth_gbs"]["median"])
print("wrote", out)
PY
