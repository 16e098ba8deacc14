#!/usr/bin/env bash
# Builds and runs the Highway probe (docs/ISA.md "Highway or per-ISA kernels"; not part of polykv):
#   bench/highway_probe/build.sh [REPS [ROUNDS]]  x86: hwy AVX2/AVX-512 vs polykv's kernels, ROUNDS
#       (default 3) runs of min-of-REPS (default 15), JSON on stdout (with the CPU and `uptime` load);
#       aarch64: the NEON target cross-compiled and checked under qemu (its output in the JSON too).
# Needs libhwy-dev (Debian 12: Highway 1.0.3), build/ (scripts/build.sh) and, for the aarch64 part,
# the cross toolchain of scripts/arm64-test.sh.
set -euo pipefail
cd "$(dirname "$0")"
out=${PROBE_OUT:-/tmp/highway_probe}
mkdir -p "$out"
src=../../src
flags=(-O2 -std=c++20 -DHWY_COMPILE_ONLY_STATIC)
g++ "${flags[@]}" -march=haswell -maes -DPROBE_DOT=hwy_q8_0_dot_avx2 -DPROBE_TARGET=hwy_probe_target_avx2 \
  -c q8_dot_hwy.cpp -o "$out/hwy_avx2.o"
g++ "${flags[@]}" -march=icelake-server \
  -DPROBE_DOT=hwy_q8_0_dot_avx512 -DPROBE_TARGET=hwy_probe_target_avx512 -c q8_dot_hwy.cpp -o "$out/hwy_avx512.o"
g++ "${flags[@]}" -I"$src" probe_main.cpp "$out/hwy_avx2.o" "$out/hwy_avx512.o" ../../build/libpolykv_lib.a \
  -lpthread -o "$out/probe"
arm64="not built (no cross toolchain)"
if command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null; then
  # Highway's NEON target needs +crypto (AES) in the flags of the static target.
  aarch64-linux-gnu-g++ "${flags[@]}" -march=armv8.2-a+dotprod+crypto -DPROBE_DOT=hwy_q8_0_dot_neon \
    -DPROBE_TARGET=hwy_probe_target_neon -c q8_dot_hwy.cpp -o "$out/hwy_neon.o"
  aarch64-linux-gnu-g++ "${flags[@]}" probe_arm64.cpp "$out/hwy_neon.o" -o "$out/probe_arm64"
  arm64=$(qemu-aarch64 -L / "$out/probe_arm64" | paste -sd';')
fi
echo "{\"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\","
echo " \"uptime_before\": \"$(uptime | xargs)\","
echo " \"arm64_qemu_check\": \"$arm64\","
echo " \"rounds\": ["
for ((r = 1; r <= ${2:-3}; ++r)); do
  "$out/probe" "${1:-15}"
  ((r < ${2:-3})) && echo ","
done
echo "],"
echo " \"uptime_after\": \"$(uptime | xargs)\"}"
