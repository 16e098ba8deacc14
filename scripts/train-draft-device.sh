#!/usr/bin/env bash
# Trains the models polykv drafts with for the embedded model, on a GPU machine (issue #10):
#   bash scripts/train-draft-device.sh [extra tools/train_draft.py options]
# Needs python3 with torch (CUDA), sentencepiece and numpy; reads its training text from that
# Python's site-packages. Writes under $OUT (default ./train-draft-out): polykv-draft.gguf,
# polykv-code-26m-mtp.gguf (f16 additions; quantize them with `polykv quantize`), train_draft.json
# (losses, held-out agreement with the target, timings) and train_draft.log. Everything is written
# within --deadline seconds (default 450). Exit status: the trainer's (non-zero on any failure).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/train-draft-out}"
mkdir -p "$OUT"
if ! python3 -c 'import torch, sentencepiece, numpy; assert torch.cuda.is_available(), "torch sees no GPU"'; then
  echo "train-draft-device: needs python3 with torch (with a visible CUDA GPU), sentencepiece and numpy" >&2
  exit 1
fi
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null || true
set +e
python3 tools/train_draft.py --out "$OUT" "$@" 2>&1 | tee "$OUT/train_draft.log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  echo "train-draft-device: FAILED (exit $rc); see $OUT/train_draft.log" >&2
  exit "$rc"
fi
ls -l "$OUT"
