#!/usr/bin/env bash
# Prepares the working tree for one device call within the 64 MiB carry limit, and puts it back after.
#
#   scripts/gpu-carry.sh pack CALL_SCRIPT [--no-draft] [--no-models] [--llama SRC.tar.xz]
#   scripts/gpu-carry.sh restore
#   scripts/gpu-carry.sh size
#
# pack: copies CALL_SCRIPT to the repository root as call.sh (untracked files travel), packs build-gpu/ into
# .gpucarry/build-gpu.tar.xz (without CUPTI and the timeline tool: 22 MB, not 24), moves docs/ and src/ out of the tree
# (the binaries are built; nothing on the GPU machine reads the sources) and drops them from the index, optionally the
# draft model (--no-draft: SpecCuda's draft cases then fail with "cannot open") or every models/*.gguf (--no-models:
# the model-level GPU tests fail), copies a llama.cpp source archive to .gpucarry/llama-src.tar.xz (--llama), and
# prints the count the limit applies to. Then: run `bash call.sh` with carry [".gpucarry/build-gpu.tar.xz", ...].
# restore: moves everything back and resets the index (safe to run twice). Until it runs, `git status` shows the moved
# files as deleted: never commit in between.
# size: the count now (tracked files as disk blocks, untracked-not-ignored files, .gpucarry's archives).
# The moved files wait in $POLYKV_CARRY_ASIDE (default: ../gpucarry-aside beside the repository).
# docs/GPU.md "What a call must carry" says what is safe to leave out and why.
set -euo pipefail
cd "$(dirname "$0")/.."
ASIDE=${POLYKV_CARRY_ASIDE:-$(cd .. && pwd)/gpucarry-aside}
LIMIT_KB=$((64 * 1024))

size_kb() {
  local tracked untracked carried
  tracked=$(git ls-files -z | xargs -0 du -k 2>/dev/null | awk '{s += $1} END {print s + 0}')
  untracked=$(git ls-files -z --others --exclude-standard | xargs -0 -r du -k 2>/dev/null | awk '{s += $1} END {print s + 0}')
  carried=$(du -k .gpucarry/*.tar.xz 2>/dev/null | awk '{s += $1} END {print s + 0}')
  echo $((tracked + untracked + carried))
}

case ${1:-} in
  pack)
    [[ $# -ge 2 && -f $2 ]] || { echo "usage: $0 pack CALL_SCRIPT [--no-draft] [--no-models] [--llama SRC.tar.xz]" >&2; exit 2; }
    [[ ! -e $ASIDE/docs && ! -e $ASIDE/src ]] || { echo "gpu-carry: $ASIDE holds a packed tree: run restore first" >&2; exit 1; }
    [[ -x build-gpu/polykv_tests ]] || { echo "gpu-carry: no build-gpu/: run scripts/gpu-build.sh" >&2; exit 1; }
    call=$2
    shift 2
    no_draft=0 no_models=0 llama=
    while [[ $# -gt 0 ]]; do
      case $1 in
        --no-draft) no_draft=1 ;;
        --no-models) no_models=1 ;;
        --llama) llama=$2; shift ;;
        *) echo "gpu-carry: unknown option $1" >&2; exit 2 ;;
      esac
      shift
    done
    cp "$call" call.sh
    mkdir -p .gpucarry "$ASIDE/models"
    tar cf - --exclude=build-gpu/lib/libcupti.so.13 --exclude=build-gpu/lib/libpolykv_cuda_trace.so build-gpu |
      xz -9e -T2 > .gpucarry/build-gpu.tar.xz
    for d in docs src; do
      mv "$d" "$ASIDE/$d"
      git rm -r -q --cached "$d"
    done
    if ((no_models)); then
      for f in models/*.gguf; do git rm -q --cached "$f"; mv "$f" "$ASIDE/models/"; done
    elif ((no_draft)); then
      git rm -q --cached models/polykv-draft-q8_0.gguf
      mv models/polykv-draft-q8_0.gguf "$ASIDE/models/"
    fi
    if [[ -n $llama ]]; then cp "$llama" .gpucarry/llama-src.tar.xz; else rm -f .gpucarry/llama-src.tar.xz; fi
    kb=$(size_kb)
    echo "gpu-carry: $((kb / 1024)) MiB of the 64 (tracked + untracked + .gpucarry/*.tar.xz); carry:" \
      "$(cd .gpucarry && ls *.tar.xz | sed 's|^|.gpucarry/|' | paste -sd' ')"
    ((kb <= LIMIT_KB)) || { echo "gpu-carry: over the limit: leave more out, or restore" >&2; exit 1; }
    ;;
  restore)
    for d in docs src; do [[ -d $ASIDE/$d && ! -e $d ]] && mv "$ASIDE/$d" "$d"; done
    shopt -s nullglob
    for f in "$ASIDE"/models/*.gguf; do mv "$f" models/; done
    rm -f call.sh .gpucarry/llama-src.tar.xz
    git reset -q
    git status --short
    ;;
  size)
    kb=$(size_kb)
    echo "$((kb / 1024)) MiB ($kb KiB) of the 64"
    ;;
  *)
    sed -n 2,20p "$0"
    exit 2
    ;;
esac
