#!/usr/bin/env python3
"""Per-kernel totals of an Nsight Compute raw CSV over the whole profiled window (for example the
steps that POLYKV_CUDA_PROFILE_ROWS selects), divided by STEPS: launches, µs, µs per launch, GB read
and GB/s per kernel name (templates cut), largest first.
usage: ncu_sum.py FILE.csv STEPS LABEL"""
import csv
import re
import sys
from collections import defaultdict


def short(name):
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"<.*", "<...>", name)
    return name.replace("void ", "").strip()[:70]


def main():
    path, steps, label = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    rows = list(csv.reader(open(path, newline="")))
    hdr_i = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    hdr = rows[hdr_i]
    units = rows[hdr_i + 1]
    data = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr) and r[hdr.index("ID")].strip().isdigit()]
    ki, ti, bi = hdr.index("Kernel Name"), hdr.index("gpu__time_duration.sum"), hdr.index("dram__bytes_read.sum")
    tscale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(units[ti].strip(), 1e-3)
    bscale = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(units[bi].strip(), 1.0)
    agg = defaultdict(lambda: [0, 0.0, 0.0])
    for r in data:
        a = agg[short(r[ki])]
        a[0] += 1
        a[1] += float(r[ti].replace(",", "")) * tscale
        a[2] += float(r[bi].replace(",", "")) * bscale
    total = sum(a[1] for a in agg.values()) / steps
    print(f"== {label}: {len(data)} kernels in the window, {total:.0f} us per step ({steps:g} steps)")
    print(f"{'kernel':70} {'launches':>8} {'us/step':>9} {'us/launch':>9} {'GB/step':>8} {'GB/s':>7}")
    for name, (n, t, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:70} {n / steps:8.1f} {t / steps:9.1f} {t / n:9.2f} {b / steps / 1e9:8.3f} {b / t / 1e3 if t else 0:7.0f}")


if __name__ == "__main__":
    main()
