#!/usr/bin/env bash
# Installs polykv's build and test dependencies from Debian's packages (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build pkg-config \
  libpcre2-dev libxxhash-dev nlohmann-json3-dev libcli11-dev libicu-dev \
  libgtest-dev clang-14 libclang-rt-14-dev \
  python3-numpy python3-jinja2 >/dev/null
