#!/usr/bin/env bash
# Installs polykv's build and test dependencies from Debian's packages (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build pkg-config \
  libpcre2-dev libxxhash-dev nlohmann-json3-dev libcli11-dev libicu-dev \
  libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev \
  libgtest-dev clang-14 libclang-rt-14-dev \
  python3-numpy python3-jinja2 chromium >/dev/null
# The openai npm client test (tests/e2e) needs node and npm; a node from elsewhere (NodeSource, which
# bundles npm and conflicts with Debian's npm package) is kept.
if ! command -v npm >/dev/null; then
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
