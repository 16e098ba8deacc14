#!/usr/bin/env python3
"""Fastest-repetition table of bench/verify_cost.sh output (docs/VERIFY_KERNELS.md).

For each verify_*.json in DIR: per k, the fastest repetition's step time, its ratio to k = 1's fastest, and
every repetition's time (ms), so a host that slows whole repetitions at random can still be read.
Usage: verify_best_table.py DIR
"""
import glob
import json
import sys

for f in sorted(glob.glob(f"{sys.argv[1]}/verify_*.json")):
    j = json.load(open(f))
    v = j["verify"]
    k1 = next(x for x in v if x["k"] == 1)["step_ms_min"]
    cells = [f'k={x["k"]} {x["step_ms_min"]:.1f} ms ({x["step_ms_min"] / k1:.2f}; reps '
             + " ".join(f"{r:.0f}" for r in x["step_ms_reps"]) + ")" for x in v]
    print(f'| {f.split("/")[-1]} | ' + " | ".join(cells) + " |")
