#!/usr/bin/python3
"""Pooled markdown table of several bench/spec_server.py JSONs per binary (e.g. interleaved runs of two
binaries, old-new-new-old): per binary, agent count and mode, the aggregate speedup over plain decoding of
the same repetition (median, min..max over all repetitions of all files), drafted tokens, drafting
seconds and target forward seconds per run (medians), and whether every file was lossless.
Usage: bench/spec_server_pooled.py LABEL=FILE[,FILE...] [LABEL=FILE,...]"""
import json, statistics, sys


def load(files):
    runs, lossless, loads = [], True, []
    for i, f in enumerate(files):
        r = json.load(open(f))
        lossless = lossless and r["lossless"]
        loads.append(r["uptime_before"].split("load average:")[-1].strip().split(",")[0])
        loads.append(r["uptime_after"].split("load average:")[-1].strip().split(",")[0])
        plain = {(x["agents"], x["rep"]): x for x in r["runs"] if x["mode"] == "none"}
        for x in r["runs"]:
            x = dict(x, file=i, ratio=x["aggregate_tok_s"] / plain[(x["agents"], x["rep"])]["aggregate_tok_s"])
            runs.append(x)
    return runs, lossless, loads


print("| binary | agents | mode | speedup median (min..max) | n | drafted / run | draft s / run | forward s / run |")
print("|---|---|---|---|---|---|---|---|")
notes = []
for arg in sys.argv[1:]:
    label, _, files = arg.partition("=")
    runs, lossless, loads = load(files.split(","))
    notes.append("%s: lossless %s, 1-min load at the files' starts and ends %s" % (label, lossless, " ".join(loads)))
    keys = []
    for x in runs:
        if (x["agents"], x["mode"]) not in keys:
            keys.append((x["agents"], x["mode"]))
    for a, m in keys:
        rs = [x for x in runs if x["agents"] == a and x["mode"] == m]
        ratio = [x["ratio"] for x in rs]
        med = lambda k: statistics.median([x[k] for x in rs])
        print("| %s | %d | %s | %.2fx (%.2f..%.2f) | %d | %.0f | %.3f | %.3f |" % (
            label, a, m, statistics.median(ratio), min(ratio), max(ratio), len(rs), med("drafted"), med("draft_s"),
            med("forward_s")))
for n in notes:
    print()
    print(n)
