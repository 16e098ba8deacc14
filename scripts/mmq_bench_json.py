#!/usr/bin/env python3
"""CudaMmqBench.DISABLED_VsOldPath's output (gtest stdout) -> JSON.

Usage: scripts/mmq_bench_json.py BENCH.log > docs/results/<topic>/mmq-bench.json
Keeps the copy bandwidth line, every per-matrix row (type, matrix, n_out, n_in, n, old/mmq[/wgmma] us) and
every LAYER row (type, n, old/mmq[/wgmma]/floor us). Logs of 2026-12-01e and before (columns old/v1/v2/v3[/v4], the
kernels then selectable) are read too, with those keys.
"""
import json
import re
import sys


def parse(text):
    out = {"copy_GBps": None, "matrices": [], "layers": []}
    m = re.search(r"device-to-device copy: (\d+) GB/s", text)
    if m:
        out["copy_GBps"] = int(m.group(1))
    row = re.compile(r"^(\S+)\s+(q/o|k/v|gate/up|down)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s"
                     r"(?:\s*([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+%)?")
    layer = re.compile(r"^(\S+)\s+LAYER n=(\d+)\s+old\s+([\d.]+) us\s+v1\s+([\d.]+) us\s+v2\s+([\d.]+) us\s+v3\s+([\d.]+) us\s+"
                       r"(?:v4\s+([\d.]+) us\s+)?floor\s+([\d.]+) us")
    row_new = re.compile(r"^(\S+)\s+(q/o|k/v|gate/up|down)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+"
                         r"[\d.]+%\s+[\d.]+\s*$")
    layer_new = re.compile(r"^(\S+)\s+LAYER n=(\d+)\s+old\s+([\d.]+) us\s+mmq\s+([\d.]+) us\s+floor\s+([\d.]+) us")
    # 2026-12-04 and on: the old path, the mma.sync kernel and the wgmma kernel (0.0: not run).
    row_wg = re.compile(r"^(\S+)\s+(q/o|k/v|gate/up|down)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+"
                        r"[\d.]+\s+[\d.]+%\s+[\d.]+\s+[\d.]+\s*$")
    layer_wg = re.compile(r"^(\S+)\s+LAYER n=(\d+)\s+old\s+([\d.]+) us\s+mmq\s+([\d.]+) us\s+wgmma\s+([\d.]+) us\s+"
                          r"floor\s+([\d.]+) us")
    for line in text.splitlines():
        r = row_wg.match(line)
        if r:
            out["matrices"].append({"type": r.group(1), "matrix": r.group(2), "n_out": int(r.group(3)),
                                    "n_in": int(r.group(4)), "n": int(r.group(5)), "old_us": float(r.group(6)),
                                    "mmq_us": float(r.group(7)), "wgmma_us": float(r.group(8)) or None})
            continue
        r = layer_wg.match(line)
        if r:
            out["layers"].append({"type": r.group(1), "n": int(r.group(2)), "old_us": float(r.group(3)),
                                  "mmq_us": float(r.group(4)), "wgmma_us": float(r.group(5)) or None,
                                  "floor_us": float(r.group(6))})
            continue
        r = row_new.match(line)
        if r:
            out["matrices"].append({"type": r.group(1), "matrix": r.group(2), "n_out": int(r.group(3)),
                                    "n_in": int(r.group(4)), "n": int(r.group(5)), "old_us": float(r.group(6)),
                                    "mmq_us": float(r.group(7))})
            continue
        r = layer_new.match(line)
        if r:
            out["layers"].append({"type": r.group(1), "n": int(r.group(2)), "old_us": float(r.group(3)),
                                  "mmq_us": float(r.group(4)), "floor_us": float(r.group(5))})
            continue
        r = row.match(line)
        if r:
            out["matrices"].append({"type": r.group(1), "matrix": r.group(2), "n_out": int(r.group(3)),
                                    "n_in": int(r.group(4)), "n": int(r.group(5)), "old_us": float(r.group(6)),
                                    "v1_us": float(r.group(7)), "v2_us": float(r.group(8)), "v3_us": float(r.group(9)),
                                    "v4_us": float(r.group(10)) if r.group(10) else None})
            continue
        r = layer.match(line)
        if r:
            out["layers"].append({"type": r.group(1), "n": int(r.group(2)), "old_us": float(r.group(3)),
                                  "v1_us": float(r.group(4)), "v2_us": float(r.group(5)), "v3_us": float(r.group(6)),
                                  "v4_us": float(r.group(7)) if r.group(7) else None, "floor_us": float(r.group(8))})
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        res = parse(f.read())
    if not res["matrices"]:
        print("no benchmark rows found", file=sys.stderr)
        return 1
    json.dump(res, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
