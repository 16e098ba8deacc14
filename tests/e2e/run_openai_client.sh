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

serve_args=(--api-key e2e-key)
# shellcheck source=start_server.sh
source "$here/start_server.sh"
cd "$work"
POLYKV_BASE_URL="http://127.0.0.1:$port/v1" POLYKV_API_KEY=e2e-key node --test client.test.mjs
