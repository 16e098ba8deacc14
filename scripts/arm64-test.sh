#!/usr/bin/env bash
# ARM64 (aarch64) stage of scripts/test.sh (issue #12): a cross build with Debian's cross compiler
# (cmake/aarch64-linux-gnu.cmake) whose kernel and golden tests run under qemu-user emulation. No ARM
# machine and no binfmt needed; scripts/install-deps.sh installs the toolchain (g++-aarch64-linux-gnu,
# qemu-user, the :arm64 libraries).
#   scripts/arm64-test.sh          cross-build build-arm64/ and run the tests under qemu, timed
#   scripts/arm64-test.sh --check  exit 0 when the toolchain is installed; else print what is missing, exit 1
# The build is the part of polykv the tests need: the library without chat/, server/, eval/ and
# engine/ (POLYKV_LIB_EXCLUDE; no CLI) and the test files of POLYKV_TEST_FILES below.
# The tests (qemu's default CPU "max": NEON with dotprod; every run sharded over ARM64_JOBS processes):
#   1. kernels: every matmul test (each loops over scalar and neon: all weight types, awkward
#      shapes, batch invariance), the NEON kernel tests, ISA dispatch, attention tiles and
#      attention against its reference for every K/V type pair, KV row decoders, KV types and
#      quantizers round trip (tests/data from gguf-py), turbo codecs, a few batched-attention configs;
#   2. the NEON kernels again on a CPU without dotprod (QEMU_CPU=cortex-a72: the plain variant);
#   3. golden: the five random-weight fixture models against transformers' logits
#      (../shared/fixtures or $POLYKV_FIXTURES), qwen2 with every KV type variant, neon; qwen2
#      forced scalar; the embedded model's greedy text on neon against scalar; batched forward.
# Env: ARM64_JOBS (build jobs and test shards, default nproc), ARM64_BUILD_DIR (default build-arm64),
# ARM64_TEST_TIMEOUT (seconds per test process, default 600: a hang fails instead of stalling CI).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${ARM64_JOBS:-$(nproc)}
build=${ARM64_BUILD_DIR:-build-arm64}
timeout_s=${ARM64_TEST_TIMEOUT:-600}

# qemu-user with the target's libraries from / : the :arm64 packages install the multiarch glibc
# (/lib/aarch64-linux-gnu), which the dynamic loader finds first; `-L /usr/aarch64-linux-gnu` would
# pair the cross package's ld.so (another glibc build) with it, and the first pthread_create hangs.
qemu=(qemu-aarch64 -L /)

if [[ ${1:-} == --check ]]; then
  missing=()
  command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
  command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
  [[ -e /lib/ld-linux-aarch64.so.1 ]] || missing+=("libc6:arm64")
  for pc in libpcre2-8 libxxhash cpp-httplib; do
    [[ -e /usr/lib/aarch64-linux-gnu/pkgconfig/$pc.pc ]] || missing+=("$pc.pc:arm64")
  done
  [[ -e /usr/lib/aarch64-linux-gnu/libgtest.a ]] || missing+=("libgtest-dev:arm64")
  if ((${#missing[@]})); then
    echo "missing ${missing[*]}"
    exit 1
  fi
  exit 0
fi

t_start=$SECONDS
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DPOLYKV_CUDA=OFF -DPOLYKV_LIB_EXCLUDE="chat|server|eval|engine" \
  -DPOLYKV_TEST_FILES="attention.*|forward_batch|gated_delta.*|greedy_isa|hybrid_golden|isa|kv_cache|matmul.*|model_golden|quant|ternary_(kernels|kernel_extremes|matmul|quant|lut)|turbo.*|[a-z0-9_]*neon[a-z0-9_]*" \
  >/dev/null
cmake --build "$build" -j"$jobs" --target polykv_tests
t_build=$SECONDS
echo "== arm64: cross build $((t_build - t_start)) s"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
run() {  # run LABEL ENV... -- GTEST_FILTER: the filter's tests in $jobs shards under qemu, timed
  local label=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  local filter=$2 t0=$SECONDS pids=() failed=0
  for ((i = 0; i < jobs; ++i)); do
    env "${envs[@]}" GTEST_TOTAL_SHARDS="$jobs" GTEST_SHARD_INDEX=$i timeout "$timeout_s" \
      "${qemu[@]}" "$build/polykv_tests" --gtest_brief=1 --gtest_filter="$filter" >"$logs/$i" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < jobs; ++i)); do
    if ! wait "${pids[$i]}"; then
      failed=1
      echo "== arm64: $label, shard $i of $jobs FAILED (exit status 124: over ${timeout_s} s):"
      cat "$logs/$i"
    fi
  done
  ((failed)) && exit 1
  local n skipped
  n=$(cat "$logs"/* | awk '/\[  PASSED  \]/ { s += $4 } END { print s + 0 }')
  skipped=$(cat "$logs"/* | awk '/\[  SKIPPED \] [0-9]+ test/ { s += $4 } END { print s + 0 }')
  if ((n + skipped == 0)); then
    echo "== arm64: $label: no test matched the filter"
    exit 1
  fi
  echo "== arm64: $label: $n tests passed, $skipped skipped ($((SECONDS - t0)) s)"
}
export POLYKV_TEST_EMULATOR="${qemu[*]}"  # (only CLI tests use it; none of these start the CLI)

run "kernels (scalar and neon, dotprod)" -- \
  "Isa.*:Matmul*.*:*Neon*.*:AttentionTile.*:AttentionQ8.*:GatedDelta*.*:Ternary*.*:KvRowKernels.*:AllPairs/AttentionPair.*:AttentionSinks.*:KvType.*:KvCache.*:Quant*.*:Turbo*.*:Trellis*.*:AttentionBatch.EqualsAloneF16:AttentionBatch.EqualsAloneQ8Turbo3tHd128:AttentionBatch.EqualsAloneQ4Turbo2t:AttentionBatch.ChunkingAndThreadsNeverChangeARow:AttentionBatch.RejectsMixedShapes-Isa.Environment*:TurboSpeed.*"
run "NEON kernels without dotprod (QEMU_CPU=cortex-a72)" QEMU_CPU=cortex-a72 -- \
  "*Neon*.*:Matmul.IsasAgreeWithScalar:Matmul.PackedMatchesReference:KvRowKernels.*:AttentionTile.*:TrellisDecode.*:Ternary*.*"
run "golden (transformers logits), neon" -- \
  "Model/GoldenRandom.MatchesTransformers/*:Model/GoldenRandom.*/1:Model/HybridGolden.*:GreedyIsa.*:KvTypes/ForwardBatch.*/1"
run "golden qwen2, POLYKV_ISA=scalar" POLYKV_ISA=scalar -- "Model/GoldenRandom.MatchesTransformers/1"
echo "== arm64: all passed; build $((t_build - t_start)) s, tests $((SECONDS - t_build)) s," \
  "total $((SECONDS - t_start)) s"
