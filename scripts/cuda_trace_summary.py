#!/usr/bin/env python3
"""Summarizes a kernel timeline written by tools/cuda_trace (CUPTI; docs/CUDA_DECODE.md, "In-graph timeline").

usage: cuda_trace_summary.py TRACE.csv [--skip N] [--last N] [--top K]

Decode steps run as CUDA graph launches; the kernels of one launch share its correlation id, so each
launch is one token. For the launches kept (--skip the first N, at most --last N of the rest):
  - period: start of one launch to the start of the next (what tokens/s sees), split into
    span (first kernel start to last kernel end) and host (the rest: sync, copies, sampling, launch);
  - per kernel name: calls per launch, mean duration, and mean *exposed* time: how far the kernel
    moves the launch's end (end - max(end of the kernels before it), at least 0), plus the idle time
    before it (start - that max, when positive). The exposed and idle times of a launch add up to
    its span; a kernel that runs entirely under another one (programmatic dependent launch) is not
    exposed.
Names are demangled with c++filt when it is on PATH.
"""
import csv
import shutil
import subprocess
import sys
from collections import defaultdict


def demangle(names):
    if not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short(name):
    # void polykv::cuda::(anonymous namespace)::matvec_split_kernel<polykv::cuda::hd::DecQ4_0, 1>(...) -> matvec_split_kernel<DecQ4_0, 1>
    n = name.replace("(anonymous namespace)::", "")
    if n.startswith("void "):
        n = n[5:]
    depth, cut = 0, len(n)
    for i, ch in enumerate(n):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    n = n[:cut]
    for ns in ("polykv::cuda::", "attn::", "hd::", "polykv::", "kv::"):
        n = n.replace(ns, "")
    return n[:90]


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    path = args[0]
    opt = {"--skip": 2, "--last": 1 << 30, "--top": 40}
    for i in range(1, len(args) - 1, 2):
        opt[args[i]] = int(args[i + 1])
    rows = list(csv.DictReader(open(path)))
    kernels = [r for r in rows if r["kind"] == "kernel"]
    names = demangle(sorted({r["name"] for r in kernels}))
    launches = defaultdict(list)
    others = sorted((int(r["start_ns"]), int(r["end_ns"]), r["kind"], short(names.get(r["name"], r["name"])), r["grid"])
                    for r in rows if r["graph"] == "0" and r["kind"] != "api")  # GPU work outside graphs
    apis = sorted((int(r["start_ns"]), int(r["end_ns"]), r["name"]) for r in rows if r["kind"] == "api")
    for r in kernels:
        if r["graph"] != "0":
            launches[r["correlation"]].append((int(r["start_ns"]), int(r["end_ns"]), short(names[r["name"]])))
    order = sorted(launches.values(), key=lambda ks: min(k[0] for k in ks))
    order = order[opt["--skip"]:][-opt["--last"]:]
    if len(order) < 2:
        sys.exit(f"{path}: {len(order)} graph launches kept; need 2 or more")
    periods, spans, busy_sums = [], [], []
    per = defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # calls, duration, exposed, idle before
    for i, ks in enumerate(order):
        ks.sort()
        t0 = ks[0][0]
        reach = t0
        for s, e, n in ks:
            p = per[n]
            p[0] += 1
            p[1] += e - s
            p[2] += max(0, e - max(reach, s))
            p[3] += max(0, s - reach)
            reach = max(reach, e)
        spans.append(reach - t0)
        busy_sums.append(sum(e - s for s, e, _ in ks))
        if i + 1 < len(order):
            periods.append(min(k[0] for k in order[i + 1]) - t0)
    gaps = defaultdict(lambda: [0, 0.0])  # outside-graph work between launches: count, duration
    idle_gap = 0.0
    api_gap = defaultdict(lambda: [0, 0.0])
    api_in = 0.0
    for i in range(len(order) - 1):
        a, b = max(k[1] for k in order[i]), min(k[0] for k in order[i + 1])
        reach = a
        for s0, e0, kind, nm, grid in others:
            if s0 >= a and e0 <= b:
                key = f"{kind} {nm}" + (f" ({grid} B)" if kind == "memcpy" else "")
                gaps[key][0] += 1
                gaps[key][1] += e0 - s0
                idle_gap += max(0, s0 - reach)
                reach = max(reach, e0)
        idle_gap += max(0, b - reach)
        covered = a  # host: the runtime calls that overlap the window [a, b], and the time in none of them
        for s0, e0, nm in apis:
            if e0 <= a or s0 >= b:
                continue
            o0, o1 = max(s0, a), min(e0, b)
            api_gap[nm][0] += 1
            api_gap[nm][1] += o1 - o0
            if o1 > covered:
                api_in += o1 - max(o0, covered)
                covered = o1
    n = len(order)
    mean = lambda v: sum(v) / len(v)
    period, span = mean(periods), mean(spans)
    print(f"{path}: {n} graph launches (first {opt['--skip']} skipped), {len(order[0])} kernels each")
    print(f"period {period / 1e3:.1f} us ({1e9 / period:.1f} launches/s) = span {span / 1e3:.1f} us + host "
          f"{(period - span) / 1e3:.1f} us; sum of kernel durations {mean(busy_sums) / 1e3:.1f} us")
    total_exp = sum(p[2] for p in per.values()) / n
    total_idle = sum(p[3] for p in per.values()) / n
    print(f"in the span: kernels exposed {total_exp / 1e3:.1f} us, idle between kernels {total_idle / 1e3:.1f} us")
    ng = max(1, len(order) - 1)
    print(f"between launches (per gap): GPU idle {idle_gap / ng / 1e3:.1f} us; work outside the graph:")
    for key, (c, d) in sorted(gaps.items(), key=lambda kv: -kv[1][1]):
        print(f"  {key:<80} {c / ng:5.1f} x {d / c / 1e3:7.2f} us")
    if apis:
        print(f"host runtime calls in those gaps (overlap with the gap; {api_in / ng / 1e3:.1f} us per gap in calls, "
              f"the rest host code):")
        for key, (c, d) in sorted(api_gap.items(), key=lambda kv: -kv[1][1])[:15]:
            print(f"  {key:<80} {c / ng:5.1f} x {d / c / 1e3:7.2f} us")
    print(f"{'kernel':<70} {'calls':>6} {'dur us':>8} {'exp us':>8} {'idle us':>8} {'exp/launch':>10}")
    items = sorted(per.items(), key=lambda kv: -kv[1][2])
    for name, (c, d, e, idle) in items[: opt["--top"]]:
        print(f"{name:<70} {c / n:6.1f} {d / c / 1e3:8.2f} {e / c / 1e3:8.2f} {idle / c / 1e3:8.2f} {e / n / 1e3:10.1f}")


if __name__ == "__main__":
    main()
