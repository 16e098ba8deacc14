#!/usr/bin/env python3
"""Old/new table of bench/verify_cost.sh AB runs (docs/VERIFY_KERNELS.md "2026-12-01f").

Usage: bench/verify_ab_table.py DIR [TAG]
Pools the repetitions of every round of each (weight type, depth, variant): per k the median of the
per-repetition wall ratios to k = 1 (min..max) and the median CPU-time ratio, the k = 1 step time
and the load averages seen.
"""
import glob
import json
import os
import re
import statistics
import sys

d = sys.argv[1]
tag = sys.argv[2] if len(sys.argv) > 2 else ""
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
