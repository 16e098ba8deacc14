#!/usr/bin/env bash
# ARM64 (aarch64) cross build and tests under qemu-user emulation (issue #12). Run as root on Debian 12
# (CI: .ci/run); no ARM machine and no binfmt needed.
#   1. installs Debian's cross compiler, qemu-user and the arm64 multiarch libraries the build needs
#      (skipped when ARM64_SKIP_DEPS=1);
#   2. cross-builds polykv and polykv_tests (Release, cmake/aarch64-linux-gnu.cmake) into build-arm64/;
#   3. runs under qemu-aarch64 the kernel tests (the matmul ones on scalar and neon, qemu's default
#      CPU "max": with dotprod), the NEON kernel test again on a Cortex-A72 (QEMU_CPU=cortex-a72:
#      plain ARMv8-A, no dotprod), then golden tests of a small model against ../shared/fixtures
#      (or $POLYKV_FIXTURES), forced (POLYKV_ISA) scalar and neon.
# Env: ARM64_JOBS (build jobs, default 2), ARM64_SKIP_DEPS=1, ARM64_BUILD_DIR (default build-arm64).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${ARM64_JOBS:-2}
build=${ARM64_BUILD_DIR:-build-arm64}
t_start=$SECONDS

if [[ ${ARM64_SKIP_DEPS:-0} != 1 ]]; then
  export DEBIAN_FRONTEND=noninteractive
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get update -qq
  # Header-only dependencies (nlohmann-json, CLI11) are the host's (scripts/install-deps.sh).
  apt-get install -y -qq --no-install-recommends g++-aarch64-linux-gnu qemu-user \
    libpcre2-dev:arm64 libxxhash-dev:arm64 libcpp-httplib-dev:arm64 libssl-dev:arm64 zlib1g-dev:arm64 \
    libbrotli-dev:arm64 libicu-dev:arm64 libgtest-dev:arm64 >/dev/null
fi
t_deps=$SECONDS

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DPOLYKV_CUDA=OFF -DPOLYKV_TEST_FILES="attention.*|forward_batch|isa|matmul.*|model_golden|turbo.*" >/dev/null
cmake --build "$build" -j"$jobs" --target polykv polykv_tests
t_build=$SECONDS

qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
# Tests that run the CLI (test::polykv) start it under the same emulator.
export POLYKV_TEST_EMULATOR="${qemu[*]}"
run() {  # run LABEL ENV... -- GTEST_ARGS: one gtest run under qemu, timed
  local label=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done; shift
  local t0=$SECONDS
  echo "== arm64: $label"
  env "${envs[@]}" "${qemu[@]}" "$build/polykv_tests" --gtest_brief=1 "$@"
  echo "== arm64: $label passed ($((SECONDS - t0)) s)"
}
# The matmul tests loop over supported_isas() (scalar and neon) themselves; the others follow the
# active ISA (neon, the detected one). qemu's default CPU ("max") has dotprod.
run "kernels (scalar and neon, dotprod)" -- \
  --gtest_filter="Isa.*:Matmul*.*:AttentionTile.*:KvRowKernels.*"
run "NEON kernels without dotprod (QEMU_CPU=cortex-a72)" QEMU_CPU=cortex-a72 -- --gtest_filter="MatmulNeon.*"
# Golden tests of a small random model (GoldenRandom value 1: qwen2), forced scalar and neon.
for isa in scalar neon; do
  run "golden qwen2, POLYKV_ISA=$isa" POLYKV_ISA=$isa POLYKV_REQUIRE_FIXTURES=${POLYKV_REQUIRE_FIXTURES:-1} -- \
    --gtest_filter="Model/GoldenRandom.MatchesTransformers/1:Model/GoldenRandom.DefaultKvTop1/1"
done
echo "== arm64: all passed; deps $((t_deps - t_start)) s, build $((t_build - t_deps)) s," \
  "tests $((SECONDS - t_build)) s, total $((SECONDS - t_start)) s"
