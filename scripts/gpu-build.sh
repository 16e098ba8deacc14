#!/usr/bin/env bash
# Builds the CUDA polykv for the H200 (sm_90) on this machine (no GPU needed) into a folder that runs
# on another Linux x86-64 box with a newer-or-equal glibc and an NVIDIA driver for CUDA 13:
#   build-gpu/polykv, build-gpu/polykv_tests   stripped binaries
#   build-gpu/lib/                             every shared library they need but glibc's, the driver
#                                              and cuBLAS (the GPU machine's CUDA 13 has those)
# Run there as LD_LIBRARY_PATH=build-gpu/lib:/usr/local/cuda/lib64 build-gpu/polykv ... (scripts/gpu-test.sh
# does). The CMake tree (objects, static library) is build-gpu-obj/, so build-gpu/ stays small enough
# to carry (it is checked to be under 60 MiB). Both are git-ignored (/build*/).
# Environment: POLYKV_JOBS (default 2), CMAKE_*_COMPILER_LAUNCHER (default ccache when installed).
set -euo pipefail
cd "$(dirname "$0")/.."

OBJ=build-gpu-obj
DIST=build-gpu
JOBS=${POLYKV_JOBS:-2}
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CUDA_COMPILER_LAUNCHER=${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}
fi

mkdir -p "$OBJ"
cmake -S . -B "$OBJ" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DPOLYKV_PORTABLE=ON \
  -DPOLYKV_ICU=OFF -DPOLYKV_CUDA=ON -DPOLYKV_TESTS=ON >"$OBJ/configure.log" 2>&1 ||
  { cat "$OBJ/configure.log"; exit 1; }
grep -q "polykv: CUDA backend on" "$OBJ/configure.log" ||
  { cat "$OBJ/configure.log"; echo "gpu-build: nvcc was not found: this build would have no CUDA backend" >&2; exit 1; }
cmake --build "$OBJ" -j"$JOBS" --target polykv polykv_tests
# The timeline tool (tools/cuda_trace) when the toolkit has CUPTI; its libcupti travels in lib/.
trace=
if cmake --build "$OBJ" -j"$JOBS" --target polykv_cuda_trace >/dev/null 2>&1; then trace=libpolykv_cuda_trace.so; fi

rm -rf "$DIST"
mkdir -p "$DIST/lib"
for bin in polykv polykv_tests; do
  cp "$OBJ/$bin" "$DIST/$bin"
  strip --strip-unneeded "$DIST/$bin"
done
if [[ -n $trace ]]; then
  cp "$OBJ/$trace" "$DIST/lib/$trace"
  cupti=$(ldd "$DIST/lib/$trace" | awk '$1 ~ /^libcupti/ && $3 ~ /^\// {print $3}')
  [[ -n $cupti ]] && cp -L "$cupti" "$DIST/lib/"
fi

# Shared libraries: everything ldd resolves but glibc (libc, libm, libpthread, libdl, librt, the
# loader), the NVIDIA driver (libcuda) and cuBLAS (CUDA 13 on the GPU machine).
skip='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libutil|libcuda|libnvidia-.*|libcublas|libcublasLt)\.so'
libs=$(ldd "$DIST/polykv" "$DIST/polykv_tests" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
for lib in $libs; do
  name=$(basename "$lib")
  [[ $name =~ $skip ]] && continue
  cp -L "$lib" "$DIST/lib/$name"
done
if ldd "$DIST/polykv" "$DIST/polykv_tests" | grep -q "not found"; then
  ldd "$DIST/polykv" "$DIST/polykv_tests" | grep "not found" >&2
  echo "gpu-build: unresolved libraries above" >&2
  exit 1
fi

# Report: what the binaries still need from the GPU machine, and the size to carry.
echo "gpu-build: $DIST/ ready"
for bin in polykv polykv_tests; do
  glibc=$(objdump -T "$DIST/$bin" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  cudart=$(ldd "$DIST/$bin" | grep -q libcudart && echo "shared (NOT carried: needs CUDA 13's libcudart)" || echo "static")
  echo "  $bin: $(du -h "$DIST/$bin" | cut -f1), needs glibc >= ${glibc#GLIBC_}, cudart ${cudart}, from the GPU machine: the driver and libcublas.so.13 (loaded on first use)"
done
echo "  lib/: $(ls "$DIST/lib" | tr '\n' ' ')"
size_kib=$(du -sk "$DIST" | cut -f1)
echo "  total: $((size_kib / 1024)) MiB"
# What travels is an xz tarball of $DIST (call scripts unpack .gpucarry/build-gpu.tar.xz); it and the working tree
# must fit the device's 64 MiB carry together. Make it with xz -9e: its 64 MiB dictionary spans both binaries, whose
# GPU code (the same library's fatbin) is then stored once (2026-12-02: 15.8 MB against 24.4 MB at xz's default).
if ((size_kib > 60 * 1024)); then
  echo "gpu-build: $DIST/ is over 60 MiB: carry it as tar cf - $DIST | xz -9e -T2 > .gpucarry/build-gpu.tar.xz" >&2
fi
