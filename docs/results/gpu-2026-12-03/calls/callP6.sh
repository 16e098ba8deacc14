#!/usr/bin/env bash
# 2026-12-03 call P6: the 1.1 ms the GPU idles between two 64-agent decode steps (call P4): a kernel timeline with
# the host's CUDA runtime calls (POLYKV_TRACE_API=1) of bench-agents --agents 64 at 32768 (llama-3.1-8b q4_0), and
# the same for one agent.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 12 > /dev/null 2>&1
note "synth done at $((SECONDS-t0)) s"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
for n in 64 1; do
  POLYKV_TRACE_API=1 CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/t.csv timeout 120 $P bench-agents -m $M --device cuda \
    --agents $n --share on --context 32768 --suffix 32 --gen 32 -r 1 --json 2>>$OUT/bench.err | grep '^{' >> $OUT/agents.jsonl
  python3 scripts/cuda_trace_summary.py $OUT/t.csv --skip 8 --top 12 > $OUT/trace-api-$n.summary.txt 2>&1
  # The host calls between the last two launches kept, in order (what the host does in one gap).
  python3 - "$OUT/t.csv" > $OUT/trace-api-$n.gap.txt <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
launches = sorted(int(r["start_ns"]) for r in rows if r["kind"] == "api" and r["name"].startswith("cudaGraphLaunch"))
if len(launches) < 3: sys.exit("too few graph launches")
a, b = launches[-3], launches[-2]
for r in sorted(rows, key=lambda r: int(r["start_ns"])):
    s, e = int(r["start_ns"]), int(r["end_ns"])
    if a <= s <= b:
        print(f"{(s - a) / 1e3:10.1f} us +{(e - s) / 1e3:8.1f} us  {r['kind']:7s} {r['name'][:90]}")
PY
  rm -f $OUT/t.csv
  note "agents $n ($((SECONDS-t0)) s): $(tail -1 $OUT/agents.jsonl | grep -oE '"decode_tok_s":[0-9.]+')"
  sed -n 1,12p $OUT/trace-api-$n.summary.txt >> $SUMMARY
done
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf logs.tar.xz bench.err && rm -f bench.err
