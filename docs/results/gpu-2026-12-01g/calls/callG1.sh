#!/usr/bin/env bash
# gputexts/code.txt: a copy of ../shared/fixtures/models/trained/ppl_dev.txt (untracked in the checkout, carried with it).
# 2026-12-01g call G1 (main at the start of the session): (1) speculative decoding on CUDA with the embedded
# model (none vs ngram / draft / mtp, n-max 3, adaptive and fixed, code text, 3 interleaved reps in one process);
# (2) decode at depth 0 (-p 512 -n 128) per KV pair, 2 interleaved rounds x 3 reps; (3) Nsight Compute: every
# kernel of one decode token after a 512-token prompt (f16/f16 and q8_0/turbo3t) and the warp-stall sections of
# kv_store, decode8 and rmsnorm_acts.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
rm -rf build-gpu; tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "commit $(git rev-parse --short HEAD 2>/dev/null) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
P=build-gpu/polykv; M=/tmp/llama-3.1-8b-q4_0.gguf; M8=/tmp/llama-3.1-8b-q8_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
SYN=$!
t0=$SECONDS
E=models/polykv-code-26m-q8_0.gguf
for d in 0; do for pol in adaptive fixed; do
  for sp in ngram draft mtp; do
    extra=(); [ $sp = draft ] && extra=(--model-draft models/polykv-draft-q8_0.gguf); [ $sp = mtp ] && extra=(--model-mtp models/polykv-code-26m-mtp-head-q8_0.gguf)
    timeout 120 $P bench -m $E --device cuda --spec $sp --spec-n-max 3 --spec-policy $pol "${extra[@]}" --text gputexts/code.txt -d $d -p 256 -n 128 -r 3 --json 2>>$OUT/spec.err | grep '^{' >> $OUT/spec.jsonl
    note "spec d$d $sp $pol: $(tail -1 $OUT/spec.jsonl | grep -oE '"(speedup_median|speedup_min|speedup_max|acceptance_rate|tokens_per_step|decode_tok_s_base|decode_tok_s_spec|lossless)":[^,]*' | paste -sd' ') ($((SECONDS-t0)) s)"
  done
done; done
wait $SYN
for r in 1 2; do
  for cfg in "f16 f16" "q8_0 q8_0" "q8_0 turbo3t" "q8_0 turbo3" "turbo3t turbo3t"; do set -- $cfg
    timeout 60 $P bench -m $M --device cuda -p 512 -n 128 -r 3 -ctk $1 -ctv $2 --json --bandwidth 4240 2>>$OUT/d0.err | grep '^{' | sed "s/^{/{\"round\":$r,/" >> $OUT/d0.jsonl
    note "r$r d0 $cfg: $(tail -1 $OUT/d0.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]') ($((SECONDS-t0)) s)"
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for cfg in "f16 f16" "q8_0 turbo3t"; do set -- $cfg
  timeout 150 $NCU --metrics gpu__time_duration.sum,dram__bytes_read.sum --clock-control none --cache-control none --export /tmp/pk-$1-$2 -f \
    $P bench -m $M --device cuda -p 512 -n 3 -r 1 -ctk $1 -ctv $2 --bandwidth 4240 > $OUT/ncu-run-$1-$2.log 2>&1
  $NCU --import /tmp/pk-$1-$2.ncu-rep --csv --page raw > /tmp/pk.csv 2>/dev/null && python3 scripts/ncu_table.py /tmp/pk.csv "polykv $1/$2" > $OUT/profile-$1-$2.txt 2>&1
  head -14 $OUT/profile-$1-$2.txt | tee -a $SUMMARY
done
timeout 150 $NCU --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section InstructionStats --section SourceCounters --clock-control none -k 'regex:kv_store|decode8|rmsnorm_acts|merge' \
  --launch-skip 400 --launch-count 8 --import-source yes --export /tmp/det -f \
  $P bench -m $M --device cuda -p 512 -n 3 -r 1 -ctk q8_0 -ctv turbo3t --bandwidth 4240 > $OUT/ncu-det-run.log 2>&1
$NCU --import /tmp/det.ncu-rep --page details > $OUT/ncu-details.txt 2>&1
$NCU --import /tmp/det.ncu-rep --page source --csv --print-source sass > $OUT/ncu-source.csv 2>$OUT/ncu-source.err || true
note "ncu done ($((SECONDS-t0)) s); source page $(wc -c < $OUT/ncu-source.csv) bytes"
cd $OUT && tar cJf results.tar.xz --exclude=summary.txt *.log *.err *.jsonl *.txt *.csv 2>/dev/null; rm -f *.log *.err *.csv profile-*.txt ncu-details.txt
