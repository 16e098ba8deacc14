#!/usr/bin/python3
"""N agents over one shared context through a server's OpenAI-style /v1/completions (streaming), the
same client for polykv serve and llama.cpp's llama-server, so both are measured the same way.

Per agent count N (the server is started by this script with --parallel N, then stopped):
  phase 1, arrival: agent 1 sends context + its private suffix and waits for its first token; then
           agents 2..N send theirs at once. Reported: time to first token of agent 1 and of 2..N.
           (polykv shares the context's cached KV blocks; llama-server's slots each hold their own.)
  phase 2, decode: every agent sends the same prompt again with max_tokens = GEN and ignore_eos, all
           at once; each prompt is cached by then (polykv: prefix cache; llama-server: the slot's
           own prompt cache), so all agents decode together. Reported: aggregate decode tokens/s
           over the window in which every agent is decoding (tokens stamped in it / its length).
  KV memory: polykv: blocks in use at the peak of phase 2 (its /metrics); llama-server: the KV
           cache it allocates for --parallel N slots of the needed context (from its log).

Usage: bench/agents_http.py --server polykv|llama --binary PATH --model FILE --agents 1,4,16
          [--threads 2] [--context 4096] [--suffix 32] [--gen 32] [--text FILE] [--port 8091] [--json OUT]
The context is the first CONTEXT tokens of --text (default: the fixtures' held-out Python text),
tokenized by the server itself (/tokenize), so both servers see the same token ids.
Standard library only.
"""
import argparse, json, os, re, signal, subprocess, sys, threading, time, urllib.request

def post(url, body, stream=False, timeout=3600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)

def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read().decode()

def wait_ready(base, proc, timeout=1800):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %d" % proc.returncode)
        try:
            if json.loads(get(base + "/health")).get("status") == "ok":
                return
        except Exception:
            pass
        time.sleep(0.5)
    raise RuntimeError("server not ready")

def stream_completion(base, prompt_ids, max_tokens, log):
    """Streams one completion; appends the arrival time of every token chunk to log['times']."""
    body = {"prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "cache_prompt": True}
    log["sent"] = time.time()
    with post(base + "/v1/completions", body, stream=True) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            ev = json.loads(data)
            if ev.get("choices") and (ev["choices"][0].get("text") is not None):
                if ev["choices"][0].get("text") != "" or ev["choices"][0].get("finish_reason") is None:
                    log["times"].append(time.time())

def kv_in_use_polykv(base):
    m = get(base + "/metrics")
    used = re.search(r"^polykv_kv_blocks_used\s+(\S+)", m, re.M)
    per = re.search(r"^polykv_kv_block_bytes\s+(\S+)", m, re.M)
    return float(used.group(1)) * float(per.group(1)) if used and per else float("nan")

def run(args, n):
    port = args.port
    base = "http://127.0.0.1:%d" % port
    need = args.context + args.suffix + args.gen + 64
    if args.server == "polykv":
        cmd = [args.binary, "serve", "-m", args.model, "--port", str(port), "--parallel", str(n), "-t", str(args.threads),
               "-c", str(args.context + n * (args.suffix + args.gen + 128) + 1024) if args.share else str(n * need + 1024)]
    else:
        cmd = [args.binary, "-m", args.model, "--port", str(port), "--parallel", str(n), "-t", str(args.threads),
               "-c", str(n * need), "-fa", "on", "--no-warmup"]
    log_path = "/tmp/agents_http_server_%s_%d.log" % (args.server, n)
    logf = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    try:
        wait_ready(base, proc)
        text = open(args.text, encoding="utf-8", errors="replace").read()
        with post(base + "/tokenize", {"content": text[: args.context * 8]}) as r:
            ids = json.loads(r.read())["tokens"]
        doc = ids[: args.context]
        assert len(doc) == args.context, "text too short for the context"
        suffixes = [json.loads(post(base + "/tokenize", {"content": "\n# agent %d: check the function `f%d` for bugs\n" % (a, a)}).read())["tokens"]
                    for a in range(n)]
        prompts = [doc + s[: args.suffix] for s in suffixes]
        # Phase 1: arrival.
        logs = [{"times": []} for _ in range(n)]
        stream_completion(base, prompts[0], 1, logs[0])
        threads = [threading.Thread(target=stream_completion, args=(base, prompts[a], 1, logs[a])) for a in range(1, n)]
        for t in threads: t.start()
        for t in threads: t.join()
        ttft = [l["times"][0] - l["sent"] for l in logs]
        # Phase 2: decode, all at once.
        logs2 = [{"times": []} for _ in range(n)]
        peak = [0.0]
        stop = threading.Event()
        def poll():
            while not stop.is_set():
                if args.server == "polykv":
                    try: peak[0] = max(peak[0], kv_in_use_polykv(base))
                    except Exception: pass
                time.sleep(0.05)
        poller = threading.Thread(target=poll); poller.start()
        threads = [threading.Thread(target=stream_completion, args=(base, prompts[a], args.gen, logs2[a])) for a in range(n)]
        for t in threads: t.start()
        for t in threads: t.join()
        stop.set(); poller.join()
        w0 = max(l["times"][0] for l in logs2)
        w1 = min(l["times"][-1] for l in logs2)
        in_window = sum(1 for l in logs2 for t in l["times"] if w0 < t <= w1)
        decode = in_window / (w1 - w0) if w1 > w0 else float("nan")
        tokens = [len(l["times"]) for l in logs2]
        kv = peak[0]
        if args.server == "llama":
            logf.flush()
            m = re.findall(r"llama_kv_cache:.*size\s*=\s*([0-9.]+) MiB", open(log_path).read())
            kv = float(m[-1]) * 1048576 if m else float("nan")
        return {"server": args.server, "agents": n, "context": args.context, "suffix": args.suffix, "gen": args.gen,
                "threads": args.threads, "ttft_first_s": ttft[0],
                "ttft_rest_mean_s": sum(ttft[1:]) / (n - 1) if n > 1 else 0.0,
                "ttft_rest_max_s": max(ttft[1:]) if n > 1 else 0.0,
                "decode_tok_s": decode, "decode_window_s": w1 - w0, "tokens_per_agent": tokens,
                "kv_bytes": kv, "command": " ".join(cmd)}
    finally:
        proc.send_signal(signal.SIGINT)
        try: proc.wait(timeout=30)
        except subprocess.TimeoutExpired: proc.kill()
        logf.close()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", choices=["polykv", "llama"], required=True)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--agents", default="1,4,16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--suffix", type=int, default=32)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--share", type=int, default=1, help="polykv: size the KV pool for a shared context (1) or for copies (0)")
    ap.add_argument("--text", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures", "models", "trained", "ppl_dev.txt"))
    ap.add_argument("--port", type=int, default=8091)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    rows = []
    for n in [int(x) for x in args.agents.split(",")]:
        r = run(args, n)
        rows.append(r)
        print(json.dumps(r), flush=True)
    if args.json:
        with open(args.json, "a") as f:
            for r in rows: f.write(json.dumps(r) + "\n")

if __name__ == "__main__":
    main()
