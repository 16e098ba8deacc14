#!/usr/bin/env bash
# The static figures of docs/CUDA_DECODE.md "k-quant heads for the lanes, and q5_K" (no GPU needed): PTX instructions
# of the one-column split mat-vec kernels (q4_K, q4_0) and ptxas's registers / spills of every q4_K / q5_K split
# kernel, for the tree at REV (default HEAD). Usage: docs/results/gpu-2026-12-05d/ptx_count.sh [REV]
# 2026-12-05d: q4_K 978 at 1643077 (before), 705 after; q4_0 710 both.
set -euo pipefail
cd "$(dirname "$0")/../../.."
rev=${1:-HEAD}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$rev" src | tar x -C "$tmp"
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
flags=(-DPOLYKV_HAVE_CUDA -I"$tmp/src" -O3 -std=c++20 -x cu)
"$nvcc" "${flags[@]}" -arch=sm_90 --ptx "$tmp/src/backend/cuda/matmul_cuda_split.cu" -o "$tmp/split.ptx"
"$nvcc" "${flags[@]}" --generate-code=arch=compute_90,code=[sm_90] -c "$tmp/src/backend/cuda/matmul_cuda_split.cu" \
  -o "$tmp/split.o" -Xptxas -v 2>"$tmp/ptxas.txt"
python3 - "$tmp/split.ptx" "$tmp/ptxas.txt" <<'PY'
import re, sys
ptx = open(sys.argv[1]).read()
for a in [m.start() for m in re.finditer(r'\.entry ', ptx)]:
    head = ptx[a:a + 300]
    m = re.search(r'matvec_split_kernelINS0_2hd7(DecQ4_K|DecQ4_0)ELi1E(Li0E)?E', head)
    if not m:
        continue
    body = ptx[a:ptx.find('\n}\n', a)]
    n = sum(1 for l in body.split('\n') if re.match(r'\s+[a-z@]', l) and not l.strip().startswith(('.', '//')))
    print(f'PTX instructions, one-column split kernel, {m.group(1)}: {n}')
lines = open(sys.argv[2]).read().split('\n')
cur = None
for i, l in enumerate(lines):
    m = re.search(r"Compiling entry function '(\S+)'", l)
    if m:
        cur = m.group(1)
    r = re.search(r'Used (\d+) registers', l)
    if r and cur and re.search(r'matvec_split\w*DecQ[45]_K', cur):
        name = re.search(r'(matvec_split\w*?kernel)\w*?(DecQ\d_K\w*?)EEv', cur)
        spill = lines[i - 1].strip() if 'spill' in lines[i - 1] else ''
        print(f'{name.group(1)} {name.group(2)}: {r.group(1)} registers; {spill}')
PY
