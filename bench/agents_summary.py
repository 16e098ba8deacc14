#!/usr/bin/python3
"""Tables (min–max over repetitions) from the JSON lines of bench-agents and bench/agents_http.py.
Usage: bench/agents_summary.py FILE.jsonl...   (KV for llama-server: f16 K and V for its whole -c,
computed from the model shape given by --kv-bytes-per-token, as it allocates them at start-up)."""
import json, sys, collections
kv_per_token = None
files = []
for a in sys.argv[1:]:
    if a.startswith("--kv-bytes-per-token="): kv_per_token = float(a.split("=")[1])
    else: files.append(a)
rows = collections.defaultdict(list)
for f in files:
    for line in open(f):
        j = json.loads(line)
        key = (j.get("server", "polykv (engine)"), j["agents"], j.get("share", None), j["context"])
        if j.get("server") == "llama" and kv_per_token:
            n_ctx = int(j["command"].split(" -c ")[1].split()[0])
            j["kv_bytes"] = n_ctx * kv_per_token
        rows[key].append(j)
def rng(vals, fmt):
    vals = [v for v in vals if v == v]
    if not vals: return "n/a"
    lo, hi = min(vals), max(vals)
    return (fmt % lo) if fmt % lo == fmt % hi else (fmt % lo) + "–" + (fmt % hi)
print("| server | agents | share | context | KV MiB | TTFT agent 1 s | TTFT agents 2..N mean s | rest / first | aggregate decode tok/s | reps |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(rows, key=lambda k: (k[3], k[0], k[1], not k[2])):
    js = rows[key]
    kv = [j.get("kv_peak_bytes", j.get("kv_bytes", float("nan"))) / 1048576 for j in js]
    ttf = [j["ttft_first_s"] for j in js]
    ttr = [j["ttft_rest_mean_s"] for j in js]
    ratio = [r / f for r, f in zip(ttr, ttf)] if key[1] > 1 else []
    print("| %s | %d | %s | %d | %s | %s | %s | %s | %s | %d |" % (key[0], key[1], {True: "on", False: "off", None: "auto"}[key[2]], key[3],
          rng(kv, "%.1f"), rng(ttf, "%.2f"), rng(ttr, "%.3f") if key[1] > 1 else "-", rng(ratio, "%.2f") if ratio else "-",
          rng([j["decode_tok_s"] for j in js], "%.0f"), len(js)))
