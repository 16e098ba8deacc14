#!/usr/bin/python3
"""Markdown table of a bench/spec_server.py JSON: per agent count and mode, the aggregate speedup over
plain decoding of the same repetition (median, min..max), acceptance, tokens per verify step, and the
step composition (target rows per forward pass, generated tokens per pass, forward CPU ms per
generated token). Usage: bench/spec_server_table.py FILE.json"""
import json, statistics, sys

r = json.load(open(sys.argv[1]))
print("load: %s | %s" % (r["uptime_before"].split("load average:")[-1].strip(), r["uptime_after"].split("load average:")[-1].strip()))
print("| agents | mode | speedup median (min..max) | acceptance | tok/step | rows/pass | gen/pass | fwd CPU ms/token |")
print("|---|---|---|---|---|---|---|---|")
for s in r["summary"]:
    runs = [x for x in r["runs"] if x["agents"] == s["agents"] and x["mode"] == s["mode"]]
    med = lambda k: statistics.median([x[k] for x in runs if x.get(k) is not None]) if any(x.get(k) is not None for x in runs) else float("nan")
    cpu = statistics.median([1e3 * x["forward_cpu_s"] / sum(x["tokens"]) for x in runs])
    sp = s["aggregate_speedup"]
    acc = s["acceptance_rate"]["median"] if s["acceptance_rate"] else None
    tps = s["tokens_per_step"]["median"] if s["tokens_per_step"] else None
    print("| %d | %s | %.2fx (%.2f..%.2f) | %s | %s | %.1f | %.2f | %.2f |" % (
        s["agents"], s["mode"], sp["median"], sp["min"], sp["max"], "%.0f%%" % (100 * acc) if acc is not None else "-",
        "%.2f" % tps if tps else "-", med("rows_per_step"), med("tokens_per_pass"), cpu))
print("lossless:", r["lossless"])
