#!/usr/bin/env bash
# NOT RUN: too little device time was left to start a machine (the 16 tests stay unrun on the final build).
# 2026-12-03 (second session) call Q6, Q5's build: the GPU tests of Q5's filter that its 110 s shards cut short
# (calls/Q6-tests.txt), each in its own process, all at once, 100 s each.
source scripts/gpu-lib.sh; call_setup
mkdir -p $OUT/q6
while read -r t; do
  ( timeout 100 $T --gtest_filter="$t" --gtest_color=no > "$OUT/q6/$(echo "$t" | tr '/' '_').log" 2>&1
    echo "rc=$? $t" >> $OUT/q6/rc.txt ) &
done < docs/results/gpu-2026-12-03b/calls/Q6-tests.txt
wait
sort -k2 $OUT/q6/rc.txt >> $SUMMARY
grep -h -E '^\[  (FAILED|SKIPPED) +\] [A-Za-z]' $OUT/q6/*.log | sort -u >> $SUMMARY
