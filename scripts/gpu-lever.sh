#!/usr/bin/env bash
# One device call for a kernel lever (issue 13): the CKKS backend's
# bit-identity tests of the staged tree, an A/B of FGb bootstraps between
# staged binaries, and `bench ckks` (device policy) of each binary.
#
#   OUT=/folder bash scripts/gpu-lever.sh ROUNDS BIN...    (BIN: names in .gpu/bin;
#                                                          the first is the baseline)
#
# Steps are bounded (tests 150 s, A/B 260 s, bench 60 s a binary); a summary
# ends the output, logs and JSON go to $OUT.
set -u
rounds=$1; shift
mkdir -p "$OUT"
export HEMEM_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm --format=csv | tee "$OUT/gpu.txt"
start=$(date +%s)
timeout 150 .gpu/tests/gpu_backend.test gpu_ --test-threads=1 >"$OUT/tests.log" 2>&1
echo "gpu_backend rc=$? ($(( $(date +%s) - start )) s): $(grep -E '^test result' "$OUT/tests.log")"
grep -E "FAILED|panicked" "$OUT/tests.log" | head -5
start=$(date +%s)
AB_ITER=${AB_ITER:-9} timeout 260 bash scripts/gpu-ab.sh FGb "$rounds" "$@" | tee "$OUT/ab.txt"
echo "A/B ($(( $(date +%s) - start )) s)"
for b in "$@"; do
  timeout 60 ".gpu/bin/$b" bench ckks --preset FGb --device gpu --policies device --iterations 30 --json \
    >"$OUT/bench-$b.json" 2>"$OUT/bench-$b.err"
  python3 - "$OUT/bench-$b.json" "$b" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], 'bench failed', e); sys.exit()
print(sys.argv[2], ' '.join(f"{t['op']}={t['ms']:.4f}" for run in r['runs'] for t in run['timings']))
PY
done
