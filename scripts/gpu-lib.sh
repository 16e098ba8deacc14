# Shared by scripts/gpu-test.sh, scripts/gpu-speed.sh and the call scripts of docs/results/gpu-*/calls/
# (sourced, run ON the GPU machine): the summary notes, the time-budgeted stage runner, the carried build's
# library path, and the call scripts' setup and sharded test run.
# The caller sets BUDGET (s), T0 (=$SECONDS at start), SUMMARY (file), BIN (carried build folder),
# optionally STAGE_MIN_S (skip a stage with less than this left; 20) and STAGE_WIDTH (name column; 44).
failed=0

note() { echo "$*" | tee -a "$SUMMARY"; }
die() {
  note "ABORT: $*"
  exit 2
}
left() { echo $((BUDGET - (SECONDS - T0))); }

# stage NAME MAX_S LOG CMD...: CMD under timeout min(MAX_S, budget left - 10 s), output appended to LOG.
stage() {
  local name=$1 max=$2 log=$3 w=${STAGE_WIDTH:-44}
  shift 3
  local l=$(($(left) - 10))
  if ((l < ${STAGE_MIN_S:-20})); then
    note "$(printf "SKIP %-${w}s (%ds of the budget left)" "$name" "$l")"
    return 124
  fi
  ((max > l)) && max=$l
  local t=$SECONDS
  echo "==== $name (timeout ${max}s): $*" >>"$log"
  timeout -k 5 "$max" "$@" >>"$log" 2>&1
  local rc=$?
  local verdict=OK
  ((rc == 124 || rc == 137)) && verdict=TIME
  ((rc != 0 && rc != 124 && rc != 137)) && verdict=FAIL
  note "$(printf "%-4s %-${w}s rc=%-3d %4ds" "$verdict" "$name" "$rc" $((SECONDS - t)))"
  ((rc != 0)) && failed=1
  return $rc
}

# The carried binaries' libraries: build-gpu/lib, and cuBLAS from this machine's CUDA 13 (the
# toolkit's folder, else the pip wheel PyTorch uses). Dies naming any library still unresolved.
setup_gpu_libraries() {
  [[ -x $BIN/polykv && -x $BIN/polykv_tests ]] || die "$BIN/polykv and $BIN/polykv_tests missing: run scripts/gpu-build.sh and carry $BIN"
  export LD_LIBRARY_PATH="$PWD/$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export POLYKV_TEST_BINARY="$PWD/$BIN/polykv"  # the binary the CLI tests run (tests/test_util.cpp)
  # cuBLAS is loaded with dlopen on first use (backend/cuda/cublas_loader.cpp), so ldd does not list
  # it: put its folder on the search path whenever it is not already found there.
  if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libcublas.so.13 '; then
    local d
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
      "$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)"; do
      [[ -n $d && -e $d/libcublas.so.13 ]] && { export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"; break; }
    done
  fi
  local missing
  missing=$(ldd $BIN/polykv $BIN/polykv_tests 2>&1 | grep "not found" | sort -u)
  [[ -z $missing ]] || die "unresolved libraries: $missing"
}

# start_llama_build LOG: builds upstream llama.cpp's llama-bench for the H200 from the carried source
# .gpucarry/llama-src.tar.xz (never committed) into $LLAMA/build, in the background (~4-5 min on the CPUs);
# sets LLAMA_PID (empty when there is no source or the build is already there). LLAMA defaults to /tmp/llama.cpp.
start_llama_build() {
  LLAMA=${LLAMA:-/tmp/llama.cpp}
  LLAMA_PID=
  [[ -s .gpucarry/llama-src.tar.xz && ! -x $LLAMA/build/bin/llama-bench ]] || return 0
  (mkdir -p "$LLAMA" && tar xJf .gpucarry/llama-src.tar.xz -C "$LLAMA" --strip-components=1 &&
    cmake -S "$LLAMA" -B "$LLAMA/build" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF &&
    cmake --build "$LLAMA/build" -j"$(nproc)" --target llama-bench) >"$1" 2>&1 &
  LLAMA_PID=$!
}


# For the one-off call scripts (docs/results/gpu-*/calls/): unpacks the carried build-gpu, sets BIN, SUMMARY
# ($OUT/summary.txt), T (polykv_tests), P (polykv) and the library path, and notes the GPU and its clock.
call_setup() {
  mkdir -p /work
  ln -sfn "$PWD" /work/wt-gputest
  [ -e /work/main ] || ln -sfn "$PWD" /work/main
  rm -rf build-gpu
  tar xJf .gpucarry/build-gpu.tar.xz
  BIN=build-gpu SUMMARY=$OUT/summary.txt T=build-gpu/polykv_tests P=build-gpu/polykv
  setup_gpu_libraries
  # ../shared does not travel to the GPU machine: fixtures copied into .gpucarry/fixtures (carried) are the
  # tests' fixtures there; without them every fixture-dependent GPU test SKIPS (docs/GPU.md).
  if [ -d .gpucarry/fixtures ]; then
    export POLYKV_FIXTURES=$PWD/.gpucarry/fixtures
    note "fixtures: $(cd .gpucarry/fixtures && find . -name '*.gguf' | sort | paste -sd' ')"
  else
    note "fixtures: none carried (fixture-dependent GPU tests skip)"
  fi
  note "$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
}

# gtest_shards N MAX_S FILTER: polykv_tests ($T) in N parallel shards under FILTER, each at most MAX_S, logs
# $OUT/shard<i>.log; notes each shard's verdict, then the failed tests and the first failures' messages.
gtest_shards() {
  local n=$1 max=$2 filter=$3 t0=$SECONDS i
  for ((i = 0; i < n; ++i)); do
    (
      GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "$max" "$T" --gtest_filter="$filter" --gtest_color=no \
        >"$OUT/shard$i.log" 2>&1
      rc=$?
      { echo "---- shard $i rc=$rc ($((SECONDS - t0)) s)"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' "$OUT/shard$i.log" | sed 's/^/   /'; } >>"$SUMMARY"
    ) &
  done
  wait
  note "==== tests done in $((SECONDS - t0)) s; failed: $(grep -h '^\[  FAILED  \] [A-Za-z]' "$OUT"/shard*.log | sort -u | paste -sd' ')"
  grep -h -A3 'Failure' "$OUT"/shard*.log | head -30 >>"$SUMMARY"
}

# bench_tagged ROUND TAG BIN MODEL KV DEPTH N REPS [ENV...]: one `bench --device cuda -p 0` run of MODEL at DEPTH
# (-n N -r REPS, K/V types "k/v"), its JSON line tagged {"round", "tag"} appended to $OUT/polykv.jsonl and its
# repetitions noted, its stderr appended to $OUT/logs/polykv.err (the folder must exist); ENV (VAR=value ...) for that
# run only. Skipped (noted) past LIMIT seconds (default 540) since t0
# (the caller's $SECONDS at its start). The call scripts' A/B runs (docs/results/gpu-2026-12-07d/compare.py reads
# the tags).
bench_tagged() {
  local r=$1 tag=$2 bin=$3 m=$4 kv=$5 d=$6 n=$7 reps=$8
  shift 8
  if ((SECONDS - t0 > ${LIMIT:-540})); then
    note "skip $tag r$r (time)"
    return
  fi
  env "$@" timeout 120 "$bin" bench -m "$m" --device cuda -r "$reps" --json -d "$d" -p 0 -n "$n" -ctk "${kv%/*}" \
    -ctv "${kv#*/}" 2>>"$OUT/logs/polykv.err" | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >>"$OUT/polykv.jsonl"
  note "$tag r$r ($((SECONDS - t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" "$OUT/polykv.jsonl" |
    grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
