#!/usr/bin/env python3
"""Per-kernel totals of an Nsight Compute raw CSV over the whole profiled window (for example the
steps that POLYKV_CUDA_PROFILE_ROWS selects), divided by STEPS: launches, µs, µs per launch, GB read
and GB/s per kernel name (templates cut), largest first.
usage: ncu_sum.py FILE.csv STEPS LABEL"""
import sys
from collections import defaultdict

from ncu_table import read_kernels


def main():
    path, steps, label = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    ks = read_kernels(path)
    agg = defaultdict(lambda: [0, 0.0, 0.0])
    for name, t, b, _ in ks:
        a = agg[name]
        a[0] += 1
        a[1] += t
        a[2] += b
    total = sum(a[1] for a in agg.values()) / steps
    print(f"== {label}: {len(ks)} kernels in the window, {total:.0f} us per step ({steps:g} steps)")
    print(f"{'kernel':70} {'launches':>8} {'us/step':>9} {'us/launch':>9} {'GB/step':>8} {'GB/s':>7}")
    for name, (n, t, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:70} {n / steps:8.1f} {t / steps:9.1f} {t / n:9.2f} {b / steps / 1e9:8.3f} {b / t / 1e3 if t else 0:7.0f}")


if __name__ == "__main__":
    main()
