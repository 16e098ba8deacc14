#!/usr/bin/env python3
"""Per-kernel time of one decode token from an Nsight Compute raw CSV (scripts/gpu-profile.sh).

One token = the kernels after the second-to-last launch of the kernel that reads the most bytes (the
output projection, once per token) up to and including the last one. Prints the token's total, then
per kernel name (templates cut): launches, µs in all, µs per launch, GB read, GB/s.
usage: ncu_table.py FILE.csv LABEL"""
import csv
import re
import sys
from collections import OrderedDict


def short(name):
    name = re.sub(r"\(.*", "", name)            # parameters
    name = re.sub(r"<.*", "<...>", name)         # template arguments
    return name.replace("void ", "").strip()[:70]


def read_kernels(path):
    """The profiled kernels of an Nsight Compute raw CSV in launch order: (short name, us, bytes read, grid)."""
    rows = list(csv.reader(open(path, newline="")))
    hdr_i = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    hdr = rows[hdr_i]
    data = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr) and r[hdr.index("ID")].strip().isdigit()]
    ki, ti, bi = hdr.index("Kernel Name"), hdr.index("gpu__time_duration.sum"), hdr.index("dram__bytes_read.sum")
    units = rows[hdr_i + 1]
    tscale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(units[ti].strip(), 1e-3)
    bscale = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(units[bi].strip(), 1.0)
    ks = []
    for r in data:
        t = float(r[ti].replace(",", "")) * tscale
        b = float(r[bi].replace(",", "")) * bscale
        grid = r[hdr.index("Grid Size")] if "Grid Size" in hdr else ""
        ks.append((short(r[ki]), t, b, grid))
    return ks


def main():
    path, label = sys.argv[1], sys.argv[2]
    ks = read_kernels(path)
    if not ks:
        print(f"{label}: no kernels in {path}")
        return
    bmax = max(k[2] for k in ks)
    marks = [i for i, k in enumerate(ks) if k[2] > 0.5 * bmax]
    seg = ks[marks[-2] + 1: marks[-1] + 1] if len(marks) >= 2 else ks
    total = sum(k[1] for k in seg)
    tb = sum(k[2] for k in seg)
    print(f"== {label}: {len(ks)} kernels profiled; one token = {len(seg)} kernels, {total:.1f} us "
          f"(serialized, {1e6 / max(total, 1e-9):.0f} tok/s if back to back), {tb / 1e9:.3f} GB read")
    agg = OrderedDict()
    for name, t, b, grid in seg:
        a = agg.setdefault(name, [0, 0.0, 0.0, set()])
        a[0] += 1
        a[1] += t
        a[2] += b
        a[3].add(grid)
    print(f"{'kernel':70s} {'n':>4s} {'us':>9s} {'us/launch':>9s} {'GB':>7s} {'GB/s':>7s}")
    for name, (n, t, b, grids) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:70s} {n:4d} {t:9.1f} {t / n:9.2f} {b / 1e9:7.3f} {b / max(t, 1e-9) / 1e3:7.0f}")
    # The first layer's kernels in order, to see the sequence.
    print(f"-- first 40 kernels of the token (name, us, MB, grid)")
    for name, t, b, grid in seg[:40]:
        print(f"   {name:60s} {t:8.2f} {b / 1e6:9.3f} {grid}")


if __name__ == "__main__":
    main()
