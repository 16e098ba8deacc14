#!/usr/bin/env bash
# Packed weights in transparent huge pages (backend/cpu/packed_weights.h alloc_packed_bytes): A/B of two
# polykv binaries, interleaved rounds; per run the wall time and minor page faults of the whole command
# (load + bench) and bench's JSON. Usage: run.sh BEFORE AFTER OUT_DIR [ROUNDS]
set -euo pipefail
before=$1 after=$2 out=$3 rounds=${4:-3}
mkdir -p "$out"
: >"$out/runs.jsonl"
for ((r = 0; r < rounds; ++r)); do
  for v in before after; do
    bin=$before; [ $v = after ] && bin=$after
    for m in /tmp/moefiles/qwen3.5-35b-a3b-q4_0-L8.gguf /tmp/polykv-verify-models/llama-3.2-1b-q4_0.gguf; do
      /usr/bin/time -f '%e %R' -o "$out/time.txt" "$bin" bench -m "$m" -p 64 -n 48 -r 2 -t 2 --json >"$out/bench.json" 2>/dev/null
      read -r wall faults <"$out/time.txt"
      /usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(json.dumps({"variant":sys.argv[2],"round":int(sys.argv[3]),"model":sys.argv[4],"wall_s":float(sys.argv[5]),"minor_faults":int(sys.argv[6]),"prefill_tok_s":j["prefill_tok_s"],"decode_tok_s":j["decode_tok_s"],"read_gbs":j.get("read_bandwidth_gbs")}))' \
        "$out/bench.json" "$v" "$r" "$(basename "$m")" "$wall" "$faults" >>"$out/runs.jsonl"
      tail -1 "$out/runs.jsonl"
    done
  done
done
rm -f "$out/time.txt" "$out/bench.json"
