#!/usr/bin/env python3
"""Markdown table of the verify cost curve from bench/verify_cost.sh's JSON files.

Usage: bench/verify_table.py [DIR]   (default docs/results/verify-2026-12-01)
One row per (weight type, depth, tag): for each k the median wall-clock ratio to k = 1 with the
min..max over the interleaved repetitions, and after "/" the median ratio of process CPU time (less
disturbed on a loaded machine), then the k = 1 step time and the load average before the run.
"""
import glob
import json
import os
import sys

d = sys.argv[1] if len(sys.argv) > 1 else "docs/results/verify-2026-12-01"
rows = []
for f in sorted(glob.glob(os.path.join(d, "verify_*.json"))):
    r = json.load(open(f))
    tag = os.path.basename(f)[:-5].split("_t%d" % r["threads"])[-1].lstrip("_") or "-"
    rows.append((r["weight_type"], r["depth"], tag, r))
if not rows:
    sys.exit("no verify_*.json in " + d)
ks = [v["k"] for v in rows[0][3]["verify"]]
print("| type | depth | run | " + " | ".join("k=%d" % k for k in ks) + " | k=1 step ms | load |")
print("|---" * (len(ks) + 5) + "|")
for t, depth, tag, r in sorted(rows, key=lambda x: (x[0], x[1], x[2] != "before")):
    cells = ["%.2f (%.2f..%.2f) / %.2f" % (v["ratio"], v["ratio_min"], v["ratio_max"], v["cpu_ratio"])
             for v in r["verify"]]
    print("| %s | %d | %s | %s | %.0f | %.0f |" % (t, depth, tag, " | ".join(cells), r["verify"][0]["step_ms"],
                                                  r["load_avg_1m_before"]))
