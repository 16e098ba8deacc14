#!/usr/bin/env python3
"""The 64-agent target of issue #9 from the bench-agents runs of calls K1-K5 (agents.jsonl of each call folder):
per run (call, mode, round) the aggregate decode tok/s at 1, 16 and 64 agents on one shared 32k context and the
64 / 1 ratio, then per mode the range over its runs. Writes agents-ratio.json beside this script."""
import json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
runs = {}
for call in ("K1", "K2", "K3", "K4", "K5"):
    path = os.path.join(HERE, call, "agents.jsonl")
    if not os.path.exists(path):
        continue
    for line in open(path):
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        mode = "prefix256=%s argmax=%s warps=%s%s" % (
            r.get("prefix256", "split" if call == "K1" else "scaled"),
            r.get("argmax", "device" if call in ("K4", "K5") else "host"),
            r.get("prefix256_warps", 8), " lazy-rescale" if call == "K5" else "")
        key = (call, mode, r.get("round", 1))
        runs.setdefault(key, {})[r["agents"]] = r["decode_tok_s"]
out = {"runs": [], "modes": {}}
for (call, mode, rnd), tok in sorted(runs.items()):
    if 64 not in tok:
        continue
    ratio = tok[64] / tok[1] if 1 in tok else None
    out["runs"].append({"call": call, "mode": mode, "round": rnd, "tok_s": tok, "ratio_64_to_1": ratio})
    if ratio is not None:
        out["modes"].setdefault(mode, []).append(round(ratio, 3))
for mode, rs in out["modes"].items():
    print("%-45s 64/1 = %s" % (mode, ", ".join("%.2f" % x for x in rs)))
json.dump(out, open(os.path.join(HERE, "agents-ratio.json"), "w"), indent=1)
