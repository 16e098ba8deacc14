#!/usr/bin/env python3
"""Total GPU time per kernel name in a tools/cuda_trace CSV, for runs that are not CUDA graph launches
(prefill): cuda_trace_summary.py groups by launch, which a prefill of many plain launches does not have.

usage: cuda_trace_totals.py TRACE.csv [--top K]
Prints the wall span of all kernels, the sum of kernel durations, then per name: calls, total ms, share
of the summed kernel time. Names are shortened as cuda_trace_summary.py does.
"""
import csv
import sys
from collections import defaultdict

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cuda_trace_summary import demangle, short  # noqa: E402


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    top = 25
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i : i + 2]
    tot = defaultdict(float)
    calls = defaultdict(int)
    lo, hi = None, None
    with open(args[0], newline="") as f:
        for r in csv.DictReader(f):
            if r["kind"] != "kernel":
                continue
            s, e = int(r["start_ns"]), int(r["end_ns"])
            tot[r["name"]] += (e - s) / 1e6
            calls[r["name"]] += 1
            lo = s if lo is None else min(lo, s)
            hi = e if hi is None else max(hi, e)
    if lo is None:
        sys.exit("no kernel records")
    names = demangle(list(tot))
    total = sum(tot.values())
    print(f"span {(hi - lo) / 1e6:.2f} ms, kernels {total:.2f} ms")
    merged = defaultdict(lambda: [0, 0.0])
    for n, ms in tot.items():
        k = short(names[n])
        merged[k][0] += calls[n]
        merged[k][1] += ms
    for k, (c, ms) in sorted(merged.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{ms:10.3f} ms {100 * ms / total:5.1f}% {c:7d} calls  {k}")


if __name__ == "__main__":
    main()
