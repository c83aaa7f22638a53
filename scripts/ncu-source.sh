#!/usr/bin/env bash
# Per-instruction (SASS) profile of one kernel over a few launches of a warm
# FGb bootstrap: ncu's SourceCounters (warp stall samples and executed
# instructions per SASS line), exported as CSV for reading off the GPU.
#
#   OUT=/folder bash scripts/ncu-source.sh KERNEL [SKIP] [COUNT]
set -u
kernel=$1; skip=${2:-40}; count=${3:-6}
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
mkdir -p "$OUT"
timeout 300 "$NCU" --profile-from-start off --cache-control none --clock-control none \
  --kernel-name "$kernel" --launch-skip "$skip" --launch-count "$count" \
  --section SourceCounters --section WarpStateStats --section LaunchStats --import-source no \
  -o "$OUT/$kernel" -f .gpu/bin/hemem bootstrap --preset FGb --device gpu --policy device --iterations 2 \
  >"$OUT/$kernel.log" 2>&1
echo "$kernel profile rc=$?"
"$NCU" -i "$OUT/$kernel.ncu-rep" --page source --csv --print-source sass >"$OUT/$kernel-sass.csv" 2>"$OUT/$kernel-sass.err"
echo "source page rc=$? ($(wc -l <"$OUT/$kernel-sass.csv") lines)"
"$NCU" -i "$OUT/$kernel.ncu-rep" --page details --csv --print-units base >"$OUT/$kernel-details.csv" 2>/dev/null
