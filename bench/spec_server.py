#!/usr/bin/python3
"""Speculative decoding through the server (issue #10): 1 and N concurrent agents on ONE named pool.

Starts `polykv serve` once (the embedded model, --model-draft and --model-mtp loaded, --parallel N),
creates the pool "doc" from the first CONTEXT tokens of a held-out code document (tokenized by the
server), then, per repetition, for every agent count and every spec mode (interleaved: rep 1 runs
none, ngram, draft, mtp for 1 agent, then for N agents; rep 2 the same; ...), sends every agent's
request at once: pool "doc", prompt = the agent's own short suffix (a comment asking for a different
function), greedy, max_tokens GEN, ignore_eos, streamed, "spec": mode, "spec_n_max": K.

Per run: aggregate tokens/s (all agents' tokens / wall time from the first request to the last
token), per-agent decode tokens/s ((tokens - 1) / (last token - first token) of that agent), the
acceptance rate and tokens per verify step (deltas of /metrics' polykv_spec_* counters over the
run: runs never overlap), and the texts. Lossless: every agent's text must be the same in every mode
and repetition (greedy); the script exits 1 otherwise.

Usage: bench/spec_server.py --binary build/polykv --model M --draft D --mtp H [--agents 1,8] [--reps 3]
          [--context 1536] [--gen 128] [--spec-n-max 3] [--threads 2] [--port 8093] [--json OUT]
Standard library only (/usr/bin/python3).
"""
import argparse, datetime, json, os, re, signal, statistics, subprocess, sys, threading, time, urllib.request

MODES = ["none", "ngram", "draft", "mtp", "ngram:fixed", "draft:fixed"]


# HTTP helpers shared with the agents benchmark: post(url, body), get(url), wait_ready(base, proc).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agents_http import get, post, wait_ready  # noqa: E402


def spec_counters(base):
    m = get(base + "/metrics")
    out = {}
    for k in ("spec_steps_total", "spec_drafted_tokens_total", "spec_accepted_tokens_total", "generated_tokens_total",
              "spec_draft_forwards_total", "steps_total", "step_seconds_total", "step_rows_total", "step_seqs_total",
              "forward_seconds_total", "forward_cpu_seconds_total", "spec_draft_seconds_total",
              "spec_draft_shared_tokens_total", "spec_mtp_passes_total", "spec_mtp_shared_rows_total"):
        r = re.search(r"^polykv_%s\s+(\S+)" % k, m, re.M)
        out[k] = float(r.group(1)) if r else float("nan")
    return out


def agent(base, suffix, mode, k, gen, log):
    # mode: "none", a drafter ("ngram": the server's default policy, adaptive) or "drafter:policy"
    # (e.g. "ngram:fixed": always n-max drafts, the behaviour before the adaptive policy).
    spec, _, policy = mode.partition(":")
    body = {"pool": "doc", "prompt": suffix, "max_tokens": gen, "temperature": 0, "stream": True, "ignore_eos": True,
            "spec": spec}
    if spec != "none":
        body["spec_n_max"] = k
    if policy:
        body["spec_policy"] = policy
    log["sent"] = time.time()
    text = []
    with post(base + "/v1/completions", body) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            ev = json.loads(data)
            if "error" in ev:
                raise RuntimeError("server error: %s" % ev["error"])
            ch = ev.get("choices") or []
            if ch and ch[0].get("text"):
                log["times"].append(time.time())
                text.append(ch[0]["text"])
            if ev.get("usage"):
                log["usage"] = ev["usage"]
    log["text"] = "".join(text)


def one_run(base, suffixes, mode, k, gen):
    before = spec_counters(base)
    logs = [{"times": []} for _ in suffixes]
    errors = []

    def go(i):
        try:
            agent(base, suffixes[i], mode, k, gen, logs[i])
        except Exception as e:  # reported below; the run fails
            errors.append(repr(e))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(suffixes))]
    t0 = time.time()
    for t in threads: t.start()
    for t in threads: t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    after = spec_counters(base)
    t_end = max(l["times"][-1] for l in logs)
    tokens = [l["usage"]["completion_tokens"] if "usage" in l else len(l["times"]) for l in logs]
    per_agent = [(tokens[i] - 1) / (l["times"][-1] - l["times"][0]) if len(l["times"]) > 1 and l["times"][-1] > l["times"][0]
                 else float("nan") for i, l in enumerate(logs)]
    d = {key: after[key] - before[key] for key in after}
    return {
        "mode": mode, "agents": len(suffixes), "spec_n_max": k if mode != "none" else 0,
        "wall_s": t_end - t0, "tokens": tokens, "aggregate_tok_s": sum(tokens) / (t_end - t0),
        "per_agent_decode_tok_s": per_agent, "ttft_s": [l["times"][0] - l["sent"] for l in logs],
        "spec_steps": d["spec_steps_total"], "drafted": d["spec_drafted_tokens_total"],
        "accepted": d["spec_accepted_tokens_total"],
        # Draft-model forward passes (absent from older servers: nan).
        "draft_forwards": d["spec_draft_forwards_total"],
        # Draft-model KV positions copied from the pool's shared draft KV (2026-12-01d; older servers: nan).
        "draft_shared_tokens": d["spec_draft_shared_tokens_total"],
        # MTP head passes while drafting (batched over sequences) and head KV rows copied from the pool's
        # shared head KV (2026-12-01g; older servers: nan).
        "mtp_passes": d["spec_mtp_passes_total"], "mtp_shared_rows": d["spec_mtp_shared_rows_total"],
        "acceptance_rate": d["spec_accepted_tokens_total"] / d["spec_drafted_tokens_total"] if d["spec_drafted_tokens_total"] else None,
        # Emitted tokens per verify step: accepted drafts + the target's own token.
        "tokens_per_step": (d["spec_accepted_tokens_total"] + d["spec_steps_total"]) / d["spec_steps_total"] if d["spec_steps_total"] else None,
        "texts": [l["text"] for l in logs],
        # Step composition (engine counters; absent from older servers: nan): target forward passes
        # (engine steps), rows they computed, sequences in them, generated tokens per pass, seconds in
        # the steps / the target's forward passes / the drafters.
        "steps": d["steps_total"], "rows": d["step_rows_total"],
        "rows_per_step": d["step_rows_total"] / d["steps_total"] if d["steps_total"] else None,
        "seqs_per_step": d["step_seqs_total"] / d["steps_total"] if d["steps_total"] else None,
        "tokens_per_pass": d["generated_tokens_total"] / d["steps_total"] if d["steps_total"] else None,
        "step_s": d["step_seconds_total"], "forward_s": d["forward_seconds_total"],
        "draft_s": d["spec_draft_seconds_total"], "forward_cpu_s": d["forward_cpu_seconds_total"],
        "forward_ms_per_step": 1e3 * d["forward_seconds_total"] / d["steps_total"] if d["steps_total"] else None,
    }


def spread(xs):
    xs = [x for x in xs if x == x]
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)} if xs else None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(here, "..", "build", "polykv"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--mtp", required=True)
    ap.add_argument("--agents", default="1,8")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--context", type=int, default=1536, help="tokens of the held-out document in the pool (the model's context is 2048)")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--spec-n-max", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--port", type=int, default=8093)
    ap.add_argument("--text", default=os.path.join(here, "..", "..", "shared", "fixtures", "models", "trained", "ppl_dev.txt"))
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    counts = [int(x) for x in args.agents.split(",")]
    modes = args.modes.split(",")
    base = "http://127.0.0.1:%d" % args.port
    cmd = [args.binary, "serve", "-m", args.model, "--model-draft", args.draft, "--model-mtp", args.mtp,
           "--port", str(args.port), "--parallel", str(max(counts)), "-t", str(args.threads)]
    log_path = "/tmp/spec_server_%d.log" % args.port
    logf = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    runs = []
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    try:
        wait_ready(base, proc)
        text = open(args.text, encoding="utf-8", errors="replace").read()
        with post(base + "/tokenize", {"content": text[: args.context * 8], "add_special": True}) as r:
            doc = json.loads(r.read())["tokens"][: args.context]
        assert len(doc) == args.context, "text too short for the context"
        with post(base + "/v1/pools", {"name": "doc", "prompt": doc}) as r:
            pool = json.loads(r.read())
        topics = ["parse a config file", "retry a request", "merge two sorted lists", "validate an e-mail address",
                  "cache results on disk", "format a table", "walk a directory tree", "compute a checksum"]
        suffixes = ["\n\n# Agent %d: write a function to %s.\ndef " % (a, topics[a % len(topics)]) for a in range(max(counts))]
        # Warm-up (not recorded): one run per mode with the largest agent count.
        for mode in modes:
            one_run(base, suffixes[: max(counts)], mode, args.spec_n_max, 16)
        for rep in range(args.reps):
            for n in counts:
                for mode in modes:
                    r = one_run(base, suffixes[:n], mode, args.spec_n_max, args.gen)
                    r["rep"] = rep
                    runs.append(r)
                    print("rep %d agents %d %-11s  aggregate %6.1f tok/s  per agent %6.1f tok/s  accept %s  tok/step %s"
                          "  | passes %d rows/pass %.1f seqs/pass %.1f gen/pass %.2f fwd %.1f ms/pass (%.2f s, cpu %.2f s) draft %.2f s step %.2f s"
                          " mtp passes %s shared rows %s" % (
                        rep, n, mode, r["aggregate_tok_s"], statistics.median(r["per_agent_decode_tok_s"]),
                        "%.1f%%" % (100 * r["acceptance_rate"]) if r["acceptance_rate"] is not None else "-",
                        "%.2f" % r["tokens_per_step"] if r["tokens_per_step"] else "-",
                        r["steps"], r["rows_per_step"] or 0, r["seqs_per_step"] or 0, r["tokens_per_pass"] or 0,
                        r["forward_ms_per_step"] or 0, r["forward_s"], r["forward_cpu_s"], r["draft_s"], r["step_s"],
                        "%g" % r["mtp_passes"], "%g" % r["mtp_shared_rows"]), file=sys.stderr, flush=True)
    finally:
        proc.send_signal(signal.SIGINT)
        try: proc.wait(timeout=30)
        except subprocess.TimeoutExpired: proc.kill()
        logf.close()

    # Lossless: each agent's text equals the plain (spec none) text of the first repetition.
    lossless = True
    mismatches = []
    for n in counts:
        ref = [r for r in runs if r["agents"] == n and r["mode"] == "none"][0]["texts"]
        for r in runs:
            if r["agents"] == n and r["texts"] != ref:
                lossless = False
                mismatches.append({"agents": n, "mode": r["mode"], "rep": r["rep"],
                                   "agents_differing": [i for i in range(n) if r["texts"][i] != ref[i]]})
    summary = []
    for n in counts:
        plain = {r["rep"]: r for r in runs if r["agents"] == n and r["mode"] == "none"}
        for mode in modes:
            rs = [r for r in runs if r["agents"] == n and r["mode"] == mode]
            summary.append({
                "agents": n, "mode": mode,
                "aggregate_tok_s": spread([r["aggregate_tok_s"] for r in rs]),
                "per_agent_decode_tok_s": spread([statistics.median(r["per_agent_decode_tok_s"]) for r in rs]),
                # Ratio to plain decoding of the same repetition (interleaved, side by side).
                "aggregate_speedup": spread([r["aggregate_tok_s"] / plain[r["rep"]]["aggregate_tok_s"] for r in rs]),
                "acceptance_rate": spread([r["acceptance_rate"] for r in rs if r["acceptance_rate"] is not None]),
                "tokens_per_step": spread([r["tokens_per_step"] for r in rs if r["tokens_per_step"] is not None]),
            })
    for s in summary:
        print("agents %d %-11s  aggregate %6.1f tok/s (%.1f..%.1f)  %.2fx (%.2f..%.2f)  per agent %6.1f  accept %s" % (
            s["agents"], s["mode"], s["aggregate_tok_s"]["median"], s["aggregate_tok_s"]["min"], s["aggregate_tok_s"]["max"],
            s["aggregate_speedup"]["median"], s["aggregate_speedup"]["min"], s["aggregate_speedup"]["max"],
            s["per_agent_decode_tok_s"]["median"],
            "%.1f%%" % (100 * s["acceptance_rate"]["median"]) if s["acceptance_rate"] else "-"), file=sys.stderr)
    print("lossless:", lossless, file=sys.stderr)
    out = {
        "what": "speculative decoding through polykv serve: 1 and N concurrent agents on one named pool (bench/spec_server.py)",
        "date": datetime.datetime.utcnow().isoformat() + "Z", "command": " ".join(cmd), "pool_tokens": pool.get("tokens"),
        "context_tokens": args.context, "gen": args.gen, "spec_n_max": args.spec_n_max, "reps": args.reps,
        "threads": args.threads, "text": os.path.relpath(args.text), "suffixes": suffixes[: max(counts)],
        "uptime_before": uptime_before, "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "lossless": lossless, "mismatches": mismatches, "summary": summary,
        "runs": [{k: v for k, v in r.items() if k != "texts"} for r in runs],
        "texts": {str(n): [r for r in runs if r["agents"] == n and r["mode"] == "none"][0]["texts"] for n in counts},
    }
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print("wrote", args.json, file=sys.stderr)
    sys.exit(0 if lossless else 1)


if __name__ == "__main__":
    main()
