#!/usr/bin/env bash
# A/B of staged hemem binaries on one preset, alternated in one call:
#   OUT=/folder bash scripts/gpu-ab.sh PRESET ROUNDS BIN...   (BIN: names in .gpu/bin)
# Prints each run's median_ms and precision_bits (device policy, no budget).
set -u
preset=$1 rounds=$2; shift 2
mkdir -p "$OUT/ab"
for r in $(seq "$rounds"); do
  for b in "$@"; do
    f="$OUT/ab/$b-$preset-$r.json"
    timeout 200 ".gpu/bin/$b" bootstrap --preset "$preset" --device gpu --policy device --iterations 9 --json >"$f" 2>/dev/null
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], r['median_ms'], round(r['precision_bits'],2))" "$f" "$b" "$r"
  done
done
