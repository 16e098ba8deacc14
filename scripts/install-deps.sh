#!/usr/bin/env bash
# Installs polykv's build and test dependencies from Debian's packages (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build pkg-config \
  libpcre2-dev libxxhash-dev nlohmann-json3-dev libcli11-dev libicu-dev \
  libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev \
  libgtest-dev libboost-context-dev clang-14 libclang-rt-14-dev \
  python3-numpy python3-jinja2 python3-sentencepiece chromium >/dev/null
# The openai npm client test (tests/e2e) needs node and npm; a node from elsewhere (NodeSource, which
# bundles npm and conflicts with Debian's npm package) is kept.
if ! command -v npm >/dev/null; then
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
# The ARM64 stage of scripts/test.sh (scripts/arm64-test.sh): Debian's cross compiler, qemu-user and
# the arm64 multiarch variants of the libraries the build links (header-only nlohmann-json and CLI11
# are the host's). POLYKV_NO_ARM64=1 leaves them out (scripts/test.sh then skips that stage).
if [[ ${POLYKV_NO_ARM64:-0} != 1 ]]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends g++-aarch64-linux-gnu qemu-user \
    libpcre2-dev:arm64 libxxhash-dev:arm64 libcpp-httplib-dev:arm64 libssl-dev:arm64 zlib1g-dev:arm64 \
    libbrotli-dev:arm64 libicu-dev:arm64 libgtest-dev:arm64 >/dev/null
fi
