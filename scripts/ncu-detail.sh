#!/usr/bin/env bash
# ncu detail on a few NTT launches of one warm FGb bootstrap.
set -u
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
mkdir -p "$OUT"
for k in ntt_fwd_cols_8 ntt_fwd_rows_8 ntt_inv_cols_8; do
  timeout 200 "$NCU" --profile-from-start off --cache-control none --clock-control none \
    --kernel-name "$k" --launch-skip 40 --launch-count 6 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --csv --print-units base .gpu/bin/hemem bootstrap --preset FGb --device gpu --policy device --iterations 2 \
    > "$OUT/detail-$k.csv" 2> "$OUT/detail-$k.err"
  echo "$k rc=$?"
done
