#!/usr/bin/env bash
# Speculative decoding on the GPU (issue #10; docs/CUDA_SPEC.md). Runs ON the GPU machine from the repository
# root with a prebuilt build-gpu/ beside it (as bench/engine_step_gpu.sh), in parts (PARTS):
#   verify  the verify-step cost curve: `polykv bench --device cuda --verify-k 1,2,3,4,8` on synth llama-3.1-8b
#           in q4_0, q8_0 and q4_K at DEPTHS, default kernels and --batch-invariant, 3 repetitions each
#           (interleaved inside the run), the two modes alternating;
#   spec    speculative decoding on the embedded model: `polykv bench --device cuda --spec ngram|draft|mtp
#           --spec-n-max 3 --spec-policy adaptive|fixed` on the code text of bench/spec_sweep.sh (held-out
#           Python: gputexts/code.txt or the fixtures' ppl_dev.txt), each run's plain greedy decode = "none",
#           default kernels and --batch-invariant, ROUNDS interleaved rounds of -r 2 (the first repetition of
#           each process warms up: the summary takes the second); the default kernels may fail bench's
#           lossless check (docs/CUDA_SPEC.md says why): recorded as "lossless": false, not fatal;
#   cost    what --batch-invariant costs plain decoding and prefill: `polykv bench -p 512 -n 128` on synth
#           llama-3.1-8b q4_0 at COST_DEPTHS, both modes, 2 rounds.
# Writes $OUT/gpu_spec.jsonl (every JSON line with "part", "mode", "round" added), $OUT/gpu_spec.log (stderr,
# failures) and $OUT/gpu_spec_summary.md (bench/gpu_spec_summary.py). Environment: OUT (gpu-out), BIN
# (build-gpu), PARTS ("verify spec cost"), DEPTHS ("0 4096"), TYPES ("q4_0 q8_0 q4_K"), ROUNDS (3),
# COST_DEPTHS ("0 4096 32768"), TEXT (the code text), RUN_S (timeout of one run, 240).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=${GPU_BENCH_BIN:-${BIN:-build-gpu}}
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PARTS=${PARTS:-verify spec cost}
DEPTHS=${DEPTHS:-0 4096}
TYPES=${TYPES:-q4_0 q8_0 q4_K}
ROUNDS=${ROUNDS:-3}
COST_DEPTHS=${COST_DEPTHS:-0 4096 32768}
RUN_S=${RUN_S:-240}
JSONL=$OUT/gpu_spec.jsonl
LOG=$OUT/gpu_spec.log
P=$BIN/polykv
[[ -x $P ]] || { echo "$P missing: build it (scripts/gpu-build.sh) and carry $BIN" >&2; exit 2; }
if [[ -z ${TEXT:-} ]]; then
  for t in gputexts/code.txt shared/fixtures/models/trained/ppl_dev.txt ../shared/fixtures/models/trained/ppl_dev.txt; do
    [[ -s $t ]] && { TEXT=$t; break; }
  done
fi

# run PART MODE ROUND CMD...: one polykv run (under timeout), its JSON lines tagged into $JSONL.
run() {
  local part=$1 mode=$2 round=$3
  shift 3
  echo "==== $part $mode round $round $(uptime | sed 's/.*load/load/'): $*" >>"$LOG"
  timeout -k 5 "$RUN_S" "$@" 2>>"$LOG" | grep '^{' |
    sed "s/^{/{\"part\": \"$part\", \"mode\": \"$mode\", \"round\": $round, /" >>"$JSONL"
  local rc=${PIPESTATUS[0]}
  ((rc != 0)) && echo "rc=$rc: $part $mode round $round: $*" | tee -a "$LOG" >&2
  return 0
}
flag() { [[ $1 == invariant ]] && echo --batch-invariant; }
synth() {  # synth TYPE -> path of synth llama-3.1-8b in TYPE (made once)
  local m=/tmp/llama-3.1-8b-$1.gguf
  [[ -s $m ]] || "$P" synth --shape llama-3.1-8b --type "$1" -o "$m" --threads "$(nproc)" >>"$LOG" 2>&1
  echo "$m"
}

for part in $PARTS; do
  case $part in
    verify)
      for t in $TYPES; do
        m=$(synth "$t")
        for d in $DEPTHS; do
          for mode in default invariant; do
            run verify $mode 0 "$P" bench -m "$m" --device cuda --verify-k 1,2,3,4,8 -d "$d" -r 3 --json $(flag $mode)
          done
        done
      done
      ;;
    spec)
      [[ -n ${TEXT:-} ]] || { echo "no code text (gputexts/code.txt or shared/fixtures/...): set TEXT" | tee -a "$LOG" >&2; continue; }
      for ((r = 0; r < ROUNDS; r++)); do
        for mode in default invariant; do
          for policy in adaptive fixed; do
            for drafter in ngram draft mtp; do
              extra=()
              [[ $drafter == draft ]] && extra=(--model-draft models/polykv-draft-q8_0.gguf)
              [[ $drafter == mtp ]] && extra=(--model-mtp models/polykv-code-26m-mtp-head-q8_0.gguf)
              run spec $mode $r "$P" bench -m models/polykv-code-26m-q8_0.gguf --device cuda --spec $drafter \
                --spec-n-max 3 --spec-policy $policy "${extra[@]}" --text "$TEXT" -d 0 -p 256 -n 128 -r 2 --json $(flag $mode)
            done
          done
        done
      done
      ;;
    cost)
      m=$(synth q4_0)
      for ((r = 0; r < 2; r++)); do
        for d in $COST_DEPTHS; do
          for mode in default invariant; do
            run cost $mode $r "$P" bench -m "$m" --device cuda -p 512 -n 128 -d "$d" -r 2 --json $(flag $mode)
          done
        done
      done
      ;;
    *) echo "unknown part '$part' (verify, spec, cost)" >&2 ;;
  esac
done
python3 bench/gpu_spec_summary.py "$JSONL" | tee "$OUT/gpu_spec_summary.md"
