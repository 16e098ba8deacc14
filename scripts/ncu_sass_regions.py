#!/usr/bin/python3
"""Where a kernel's instructions go, from Nsight Compute's source page exported as CSV
(`ncu --import R.ncu-rep --page source --csv --print-source sass > S.csv`, a report taken with
`--import-source yes --section SourceCounters`).

For each kernel name (first launch in the file) it prints the warp instructions executed, then the
runs of consecutive SASS instructions executed the same number of times (a loop body or a straight
block), largest first, with their share and their most common opcodes: enough to tell which phase of a
latency-bound kernel issues the instructions.
Usage: ncu_sass_regions.py S.csv [KERNEL_SUBSTRING] [TOP]"""
import sys
from collections import Counter

from ncu_csv import first_launch_rows


def main():
    path = sys.argv[1]
    want = sys.argv[2] if len(sys.argv) > 2 else ""
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    kernels = first_launch_rows(path)
    for name, rows in kernels.items():
        if want not in name or not rows:
            continue
        ex = [int(r["Instructions Executed"] or 0) for r in rows]
        total = sum(ex)
        print(f"{name[:110]}\n  warp instructions executed (one launch): {total}")
        runs, start = [], 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or ex[i] != ex[start]:
                runs.append((ex[start] * (i - start), ex[start], i - start, start))
                start = i
        for tot, e, n, s in sorted(runs, reverse=True)[:top]:
            ops = Counter(rows[j]["Source"].split()[0].split(".")[0] for j in range(s, s + n) if rows[j]["Source"].split())
            print(f"  at {s:5d}: {n:4d} instr x {e:5d} = {tot:7d} ({100 * tot / max(total, 1):4.1f}%) "
                  + " ".join(f"{o}:{c}" for o, c in ops.most_common(6)))


if __name__ == "__main__":
    main()
