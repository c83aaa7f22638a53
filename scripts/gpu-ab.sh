#!/usr/bin/env bash
# A/B of staged hemem binaries on one preset, alternated in one call:
#   OUT=/folder [AB_ARGS="--policy planned --budget 2GiB --batch 8"] [AB_ITER=9] \
#     bash scripts/gpu-ab.sh PRESET ROUNDS BIN...   (BIN: names in .gpu/bin)
# Prints each run's median over the bootstraps after the first, every
# bootstrap's time, the bytes moved to the device in each, the precision,
# and what `fit` kept in full (diagonal storage, keys whose halves it kept)
# (AB_ARGS default: the device policy, no budget). The JSON reports are
# packed into $OUT/ab.tgz.
set -u
preset=$1 rounds=$2; shift 2
args=${AB_ARGS:---policy device}
tag=$(echo "$args" | tr -c 'A-Za-z0-9\n' '_')
mkdir -p "$OUT/ab"
for r in $(seq "$rounds"); do
  for b in "$@"; do
    f="$OUT/ab/$b-$preset-$tag-$r.json"
    # shellcheck disable=SC2086 # AB_ARGS is a list of arguments
    timeout 300 ".gpu/bin/$b" bootstrap --preset "$preset" --device gpu $args --iterations "${AB_ITER:-9}" --json >"$f" 2>/dev/null
    python3 - "$f" "$b" "$r" "$args" "$preset" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
t = r['bootstrap_ms'][1:] or r['bootstrap_ms']
print(sys.argv[5], sys.argv[2], sys.argv[4], 'round', sys.argv[3], 'median', round(statistics.median(t), 2),
      [round(x, 1) for x in t], 'GB', [round(x / 1e9, 2) for x in r['to_device_bytes'][1:]],
      'bits', round(r['precision_bits'], 2), 'bsgs', r.get('log_bsgs_ratio'),
      'prepare ms', [round(d.get('prepare', 0), 1) for d in r.get('driver_ms', [])[1:]],
      'diagonals', r.get('diagonal_storage'), 'keys kept', r.get('keys_expanded'),
      'plan', r.get('split_plan') or r.get('streaming_plan'))
PY
  done
done
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
