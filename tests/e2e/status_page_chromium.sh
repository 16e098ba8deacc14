#!/usr/bin/env bash
# Loads the status page (GET /) of `polykv serve` in headless Chromium and checks that its script
# filled in live data from /v1/status: the model, the "live" state, and a pool created beforehand.
#   tests/e2e/status_page_chromium.sh [POLYKV_BINARY] [MODEL] [WORK_DIR]
# Exit 77 (ctest: skipped) when no Chromium is installed (Debian: chromium; or set $CHROMIUM).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:-$root/build/polykv}"
model="${2:-$root/models/polykv-code-26m-q8_0.gguf}"
work="${3:-$root/build/e2e-chromium}"
chromium="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$chromium" ]; then
  echo "chromium not found: skipped"
  exit 77
fi
mkdir -p "$work"
serve_args=()
# shellcheck source=start_server.sh
source "$here/start_server.sh"
url="http://127.0.0.1:$port"
if ! python3 - "$url" <<'PY'
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/v1/pools", method="POST", headers={"Content-Type": "application/json"},
                             data=json.dumps({"name": "chromium-pool", "prompt": "def add(a, b):\n    return a + b\n"}).encode())
print(urllib.request.urlopen(req, timeout=60).read().decode())
PY
then
  echo "creating the pool failed; the server's log:"; cat "$log"; exit 1
fi
dom="$work/status.html"
# --virtual-time-budget lets the page's fetch and rendering finish before the DOM is dumped.
timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
  --user-data-dir="$work/profile" --virtual-time-budget=5000 --dump-dom "$url/" >"$dom" 2>"$work/chromium.log"
fail=0
for want in 'id="state" class="ok">live<' '<td>chromium-pool</td>' 'polykv-code-26m-q8_0 (ctx 2048'; do
  if ! grep -qF "$want" "$dom"; then
    echo "missing in the rendered page: $want"
    fail=1
  fi
done
if [ "$fail" -ne 0 ]; then
  echo "--- DOM ---"; cat "$dom"; echo "--- chromium ---"; tail -n 20 "$work/chromium.log"
  exit 1
fi
echo "status page: live data rendered in $chromium"
