#!/usr/bin/env bash
# Runs the official openai npm client (tests/e2e/openai_client) against `polykv serve` on a free port.
#   tests/e2e/run_openai_client.sh [POLYKV_BINARY] [MODEL] [WORK_DIR]
# Exit 77 (ctest: skipped) only when node or npm is missing; npm installs into WORK_DIR (default
# build/e2e-openai) with its cache there, so later runs reuse it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:-$root/build/polykv}"
model="${2:-$root/models/polykv-code-26m-q8_0.gguf}"
work="${3:-$root/build/e2e-openai}"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node or npm not found: skipped"
  exit 77
fi
mkdir -p "$work"
cp "$here/openai_client/package.json" "$here/openai_client/client.test.mjs" "$work/"
[ -f "$here/openai_client/package-lock.json" ] && cp "$here/openai_client/package-lock.json" "$work/"
(cd "$work" && npm install --no-audit --no-fund --loglevel=error --cache "$work/npm-cache" >/dev/null)

log="$work/server.log"
"$bin" serve -m "$model" --host 127.0.0.1 --port 0 -t 2 --api-key e2e-key 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
# The port from the "listening on" line, once a connection to it succeeds (bash's /dev/tcp).
port=""
for _ in $(seq 1 300); do
  port="$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$log" | head -n 1)"
  [ -n "$port" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  port=""
  kill -0 "$pid" 2>/dev/null || { echo "polykv serve exited:"; cat "$log"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "polykv serve did not start:"; cat "$log"; exit 1; }
cd "$work"
POLYKV_BASE_URL="http://127.0.0.1:$port/v1" POLYKV_API_KEY=e2e-key node --test client.test.mjs
