#!/usr/bin/env python3
"""Old/new table of bench/verify_cost.sh AB runs (docs/VERIFY_KERNELS.md "2026-12-01f").

Usage: bench/verify_ab_table.py DIR [TAG]
Pools the repetitions of every round of each (weight type, depth, variant): per k the median of the
per-repetition wall ratios to k = 1 (min..max) and the median CPU-time ratio, the k = 1 step time
and the load averages seen. With --best, a second table: per k the fastest repetition's ms per step
(over all rounds) and its ratio to k = 1's fastest, which a host that slows whole repetitions at random
disturbs least (docs/VERIFY_KERNELS.md "2026-12-02").
"""
import glob
import json
import os
import re
import statistics
import sys

args = [a for a in sys.argv[1:] if a != "--best"]
best = "--best" in sys.argv[1:]
d = args[0]
tag = args[1] if len(args) > 1 else ""
groups = {}
for f in sorted(glob.glob(os.path.join(d, "verify_*.json"))):
    m = re.match(r"verify_(.+)_d(\d+)_t\d+_?(.*?)_(old|new)(?:_r\d+)?\.json$", os.path.basename(f))
    if not m or (tag and m.group(3) != tag):
        continue
    r = json.load(open(f))
    groups.setdefault((m.group(1), int(m.group(2)), m.group(4)), []).append(r)
if not groups:
    sys.exit("no *_old / *_new verify JSON in " + d)
ks = [v["k"] for v in next(iter(groups.values()))[0]["verify"]][1:]
print("| type | depth | run | " + " | ".join("k=%d wall / CPU" % k for k in ks) + " | k=1 ms | load |")
print("|---" * (len(ks) + 5) + "|")
for (t, depth, var) in sorted(groups, key=lambda g: (g[0], g[1], g[2] != "old")):
    rs = groups[(t, depth, var)]
    cells = []
    for i, k in enumerate(ks, start=1):
        w = [x for r in rs for x in r["verify"][i]["ratio_reps"]]
        c = [x for r in rs for x in r["verify"][i]["cpu_ratio_reps"]]
        cells.append("%.2f (%.2f..%.2f) / %.2f" % (statistics.median(w), min(w), max(w), statistics.median(c)))
    k1 = statistics.median([x for r in rs for x in r["verify"][0]["step_ms_reps"]])
    loads = [r["load_avg_1m_before"] for r in rs]
    print("| %s | %d | %s | %s | %.0f | %.0f-%.0f |" % (t, depth, var, " | ".join(cells), k1, min(loads), max(loads)))
if best:
    print()
    print("| type | depth | run | " + " | ".join("k=%d best ms (ratio)" % k for k in ks) + " | k=1 best ms | reps |")
    print("|---" * (len(ks) + 5) + "|")
    for (t, depth, var) in sorted(groups, key=lambda g: (g[0], g[1], g[2] != "old")):
        rs = groups[(t, depth, var)]
        b = [min(x for r in rs for x in r["verify"][i]["step_ms_reps"]) for i in range(len(ks) + 1)]
        n = sum(len(r["verify"][0]["step_ms_reps"]) for r in rs)
        print("| %s | %d | %s | %s | %.1f | %d |" % (t, depth, var, " | ".join(
            "%.1f (%.2f)" % (b[i], b[i] / b[0]) for i in range(1, len(ks) + 1)), b[0], n))
