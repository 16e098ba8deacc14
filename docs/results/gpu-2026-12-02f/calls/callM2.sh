#!/usr/bin/env bash
# 2026-12-02 (sixth session) call M2, the build of M1: why the register-form trellis store is not faster in the graph
# (14.9 us against 13.9 for the array form of main before; the plain turbo store is 1.5x faster): Nsight Compute warp
# stall reasons (per issued instruction) and SASS source counters of one decode-row kv_store, q8_0/turbo3t, new and
# old encoders, warm caches (--cache-control none) and cold (the default), clocks as they are.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 16 > /dev/null 2>&1
note "synth done at $((SECONDS-t0)) s"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
STALL='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for v in new old; do
  e=; [ $v = old ] && e=old
  for cc in none all; do
    POLYKV_CUDA_KV_VITERBI=$e timeout 200 $NCU --section SpeedOfLight --section WarpStateStats --section InstructionStats \
      --section SourceCounters --metrics "$STALL" --clock-control none --cache-control $cc -k 'regex:kv_store' --launch-skip 40 \
      --launch-count 1 --export /tmp/kv-$v-$cc -f $P bench -m $M --device cuda -p 16 -n 3 -r 1 -ctk q8_0 -ctv turbo3t \
      --bandwidth 4240 > $OUT/ncu-run-$v-$cc.log 2>&1
    $NCU --import /tmp/kv-$v-$cc.ncu-rep --page details --print-details all > $OUT/details-$v-$cc.txt 2>&1
    $NCU --import /tmp/kv-$v-$cc.ncu-rep --page raw --csv > $OUT/raw-$v-$cc.csv 2>&1
    $NCU --import /tmp/kv-$v-$cc.ncu-rep --page source --csv --print-source sass > $OUT/sass-$v-$cc.csv 2>$OUT/src-$v-$cc.err
    python3 scripts/ncu_sass_regions.py $OUT/sass-$v-$cc.csv kv_store 12 > $OUT/regions-$v-$cc.txt 2>&1
    note "---- $v cache-control=$cc: $(grep -E '^\s+(Duration|Elapsed Cycles|Warp Cycles Per Issued)' $OUT/details-$v-$cc.txt | awk '{print $1,$2,$NF}' | paste -sd' ')"
    grep -oE 'smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio"?,"?[^,]*,"?[0-9.]+' $OUT/raw-$v-$cc.csv | head -0
    head -8 $OUT/regions-$v-$cc.txt >> $SUMMARY
  done
done
python3 - "$OUT" >> $SUMMARY <<'PY'
import csv, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "raw-*.csv"))):
    rows = list(csv.reader(open(f)))
    if len(rows) < 3: continue
    head, vals = rows[0], rows[2]
    st = [(float(vals[i].replace(",", "")), head[i].replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", ""))
          for i in range(len(head)) if "issue_stalled" in head[i] and vals[i].replace(",", "").replace(".", "").isdigit()]
    st.sort(reverse=True)
    print(os.path.basename(f), " ".join(f"{n}={v:.2f}" for v, n in st[:9]))
PY
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf ncu.tar.xz sass-*.csv raw-*.csv details-*.txt ncu-run-*.log src-*.err && rm -f sass-*.csv raw-*.csv details-*.txt ncu-run-*.log src-*.err
