#!/usr/bin/env bash
# Ternary mat-vec GB/s against the measured read bandwidth (bench/ternary_bench.cpp), interleaved
# repetitions; writes docs/results/ternary-2026-12-01f/ternary_bench.json (or $OUT) with the load
# (uptime) before and after, the CPU, the commit, and per type the median / min / max over the
# repetitions of GB/s and of its fraction of the bandwidth measured in the same repetition, for the
# current kernels and (keys old_*) the kernels before 2026-12-01f, run one after the other in every
# repetition (same process, set_ternary_old_kernels), plus new/old ratios; q4_0 and q8_0 (packed, as
# the engine runs them; no old/new difference) in the same harness; the one-core L2 (hot_core_gbs) and
# DRAM (cold_core_gbs, thread CPU time, with a plain read loop's figure) GB/s. One command, ~1-2 min:
#   bench/ternary_bench.sh                 (2 threads, 3 reps, 14336 x 4096, 1/2/4/8 tokens)
# Needs build/libpolykv_lib.a (scripts/build.sh). Options go to the benchmark (later ones win), e.g.
#   bench/ternary_bench.sh --reps 5 --mib 512 --n-in 4096 --n-out 14336 --tokens 2,4,8 --ab 0 --cold 0
# POLYKV_ISA=avx2 (or scalar) forces an ISA. BENCH_OBJS="a.o b.o" links those objects before the
# library (e.g. another version of the ternary kernels, for an A/B run; BENCH_BIN names the binary).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-docs/results/ternary-2026-12-02/ternary_bench.json}
BIN=${BENCH_BIN:-build/ternary_bench}
mkdir -p "$(dirname "$OUT")"
# shellcheck disable=SC2086
g++ -std=c++20 -O2 -Isrc bench/ternary_bench.cpp ${BENCH_OBJS:-} build/libpolykv_lib.a $(pkg-config --libs libpcre2-8) -lpthread -o "$BIN"
load_before=$(uptime)
raw=$("$BIN" --threads 2 --reps 3 --mib 384 --types tq1_0,tq2_0,ptq1_0,q4_0,q8_0 "$@")
load_after=$(uptime)
RAW="$raw" LOAD_BEFORE="$load_before" LOAD_AFTER="$load_after" \
  CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
  COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)" \
  /usr/bin/python3 - "$OUT" <<'PY'
import json, os, statistics, sys, datetime
raw = json.loads(os.environ["RAW"])
summary = {}
for name in raw["reps"][0]["types"]:
    rows = [rep["types"][name] for rep in raw["reps"]]
    s = {}
    for key in rows[0]:
        if key.startswith(("gbs_", "frac_bw_", "old_gbs_", "old_frac_bw_")):
            v = [r[key] for r in rows]
            s[key] = {"median": statistics.median(v), "min": min(v), "max": max(v)}
    for key in list(s):
        if key.startswith("gbs_") and "old_" + key in s:
            s["new_over_old_" + key[4:]] = round(s[key]["median"] / s["old_" + key]["median"], 3)
    summary[name] = s
bw = [rep["bandwidth_gbs"] for rep in raw["reps"]]
for section in ("hot_core_gbs", "cold_core_gbs", "old_hot_core_gbs", "old_cold_core_gbs"):
    for name, v in raw.get(section, {}).items():
        if isinstance(v, dict):
            for nt, g in v.items():
                summary[name][f"{section}_{nt}tok"] = g
        else:
            summary.setdefault("read_loop", {})[section] = v
doc = {
    "date_utc": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
    "commit": os.environ["COMMIT"], "cpu": os.environ["CPU"],
    "uptime_before": os.environ["LOAD_BEFORE"].strip(), "uptime_after": os.environ["LOAD_AFTER"].strip(),
    "bandwidth_gbs": {"median": statistics.median(bw), "min": min(bw), "max": max(bw)},
    "summary": summary, "raw": raw,
}
open(sys.argv[1], "w").write(json.dumps(doc, indent=1) + "\n")
print(f"read bandwidth {doc['bandwidth_gbs']['median']:.1f} GB/s (median of {len(bw)}; {min(bw):.1f}..{max(bw):.1f})")
for name, s in summary.items():
    line = ", ".join(f"{k} {v['median']:.2f} ({v['min']:.2f}..{v['max']:.2f})" if isinstance(v, dict)
                     else f"{k} {v:.2f}" for k, v in s.items())
    print(f"{name}: {line}")
print("wrote", sys.argv[1])
PY
