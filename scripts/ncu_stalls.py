#!/usr/bin/python3
"""Where a kernel's warps stall, from Nsight Compute's source page exported as CSV (`ncu --import R.ncu-rep
--page source --csv --print-source sass > S.csv`, a report taken with `--section SourceCounters`).

Prints, for the first launch of each kernel whose name contains KERNEL_SUBSTRING: the warp-stall samples
summed by SASS opcode (with the instructions executed of that opcode), then the TOP single instructions with
the most samples and their SASS text. A latency-bound kernel's samples pile up on the instruction that
waits (the consumer of a slow load, a barrier, a shuffle), which tells which phase to restructure.
Usage: ncu_stalls.py S.csv [KERNEL_SUBSTRING] [TOP]"""
import sys
from collections import defaultdict

from ncu_csv import first_launch_rows


def main():
    path = sys.argv[1]
    want = sys.argv[2] if len(sys.argv) > 2 else ""
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    kernels = first_launch_rows(path)
    for name, rows in kernels.items():
        if want not in name or not rows:
            continue
        cols = list(rows[0].keys())
        scol = next((c for c in cols if c.startswith("Warp Stall Sampling (All")), None)
        if scol is None:
            print(f"{name[:100]}: no stall-sampling column ({cols})")
            continue

        def num(r, c):
            try:
                return float((r.get(c) or "0").replace(",", ""))
            except ValueError:
                return 0.0

        total = sum(num(r, scol) for r in rows)
        ex_total = sum(num(r, "Instructions Executed") for r in rows)
        by_op = defaultdict(lambda: [0.0, 0.0])
        for r in rows:
            op = (r.get("Source") or "").split()[0] if r.get("Source") else "?"
            if op.startswith("@"):
                op = (r.get("Source") or "").split()[1]
            op = op.split(".")[0]
            by_op[op][0] += num(r, scol)
            by_op[op][1] += num(r, "Instructions Executed")
        print(f"{name[:110]}\n  stall samples {total:.0f}, warp instructions executed {ex_total:.0f}")
        # By reason (the stall_* columns: no_inst = no fetched instruction, wait = a fixed latency, long_sb = a
        # global or local load, short_sb = shared memory / MUFU, ...), and where no_inst lands: a warp that waits
        # for its instruction fetch stalls on the first instruction of a cache line (256-byte aligned here).
        reasons = [c for c in cols if c.startswith("stall_") and "(Not Issued)" not in c]
        if reasons:
            rsum = {c: sum(num(r, c) for r in rows) for c in reasons}
            print("  by reason (samples %):")
            for c, v in sorted(rsum.items(), key=lambda kv: -kv[1]):
                if v > 0:
                    print(f"    {c[6:]:18s} {100 * v / max(total, 1):5.1f}%")
            if "stall_no_inst" in cols and rsum.get("stall_no_inst", 0) > 0:
                at_line = sum(num(r, "stall_no_inst") for r in rows
                              if int(r.get("Address") or "0", 16) % 256 == 0)
                print(f"    no_inst on the first instruction of a 256-byte line: "
                      f"{100 * at_line / rsum['stall_no_inst']:.0f}% (1/16 of the instructions are)")
        print("  by opcode (samples %, instructions %):")
        for op, (s, e) in sorted(by_op.items(), key=lambda kv: -kv[1][0])[:20]:
            print(f"    {op:12s} {100 * s / max(total, 1):5.1f}%  {100 * e / max(ex_total, 1):5.1f}%")
        xcol = next((c for c in cols if c.startswith("L1 Wavefronts Shared Excessive")), None)
        wcol = next((c for c in cols if c == "L1 Wavefronts Shared"), None)
        if xcol:
            xt = sum(num(r, xcol) for r in rows)
            wt = sum(num(r, wcol) for r in rows) if wcol else 0
            print(f"  shared-memory wavefronts {wt:.0f}, excessive (bank conflicts) {xt:.0f}; top instructions by excessive:")
            for r in sorted(rows, key=lambda r: -num(r, xcol))[:12]:
                if num(r, xcol) <= 0:
                    break
                print(f"    {100 * num(r, xcol) / max(xt, 1):5.1f}%  {r.get('Address', '')}  {r.get('Source', '')[:80]}")
        print(f"  top {top} instructions by samples:")
        for r in sorted(rows, key=lambda r: -num(r, scol))[:top]:
            print(f"    {100 * num(r, scol) / max(total, 1):5.1f}%  {r.get('Address', '')}  {r.get('Source', '')[:80]}")


if __name__ == "__main__":
    main()
