#!/usr/bin/env bash
# One device call for a kernel lever (issue 13): the CKKS backend's
# bit-identity tests of the staged tree (and of each BIN's own tree where
# scripts/stage-variants.sh staged its harness), an A/B of FGb bootstraps
# between staged binaries, and `bench ckks` (device policy) of each binary.
#
#   OUT=/folder [PRESETS="FGa FTb"] [BUDGET=2GiB] [HARNESSES=1] \
#     bash scripts/gpu-lever.sh ROUNDS BIN...    (BIN: names in .gpu/bin; the first is the baseline)
#
# Then, optionally: one round of the first and last binaries on each of
# PRESETS; FGb under the planned policy and BUDGET; every other staged
# harness's gpu_* tests (HARNESSES=1: every staged harness but the
# gpu_backend ones, e.g. stage-variants.sh's TESTS). Steps are bounded (tests 150 s, A/B 260 s, bench
# 60 s a binary); logs and JSON go to $OUT.
set -u
rounds=$1; shift
mkdir -p "$OUT"
export HEMEM_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm --format=csv | tee "$OUT/gpu.txt"
start=$(date +%s)
if [[ -x .gpu/tests/gpu_backend.test ]]; then
  timeout 150 .gpu/tests/gpu_backend.test gpu_ --test-threads=1 >"$OUT/tests.log" 2>&1
  echo "gpu_backend rc=$? ($(( $(date +%s) - start )) s): $(grep -E '^test result' "$OUT/tests.log")"
  grep -E "FAILED|panicked" "$OUT/tests.log" | head -5
fi
# Each variant's own harness (scripts/stage-variants.sh), where staged.
for b in "$@"; do
  t=.gpu/tests/gpu_backend-${b#hemem-}.test
  [[ -x $t ]] || continue
  start=$(date +%s)
  timeout 150 "$t" gpu_ --test-threads=1 >"$OUT/tests-$b.log" 2>&1
  echo "gpu_backend of $b rc=$? ($(( $(date +%s) - start )) s): $(grep -E '^test result' "$OUT/tests-$b.log")"
  grep -E "FAILED|panicked" "$OUT/tests-$b.log" | head -5
done
start=$(date +%s)
AB_ITER=${AB_ITER:-9} timeout 260 bash scripts/gpu-ab.sh FGb "$rounds" "$@" | tee "$OUT/ab.txt"
echo "A/B ($(( $(date +%s) - start )) s)"
mv "$OUT/ab.tgz" "$OUT/ab-FGb.tgz" 2>/dev/null
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
first=$1; last=${*: -1}
for p in ${PRESETS:-}; do
  AB_ITER=5 timeout 200 bash scripts/gpu-ab.sh "$p" 1 "$first" "$last" | tee -a "$OUT/presets.txt"
  mv "$OUT/ab.tgz" "$OUT/ab-$p.tgz" 2>/dev/null
done
if [[ -n ${BUDGET:-} ]]; then
  AB_ITER=5 AB_ARGS="--policy planned --budget $BUDGET" timeout 200 bash scripts/gpu-ab.sh FGb 1 "$first" "$last" | tee "$OUT/budget.txt"
  mv "$OUT/ab.tgz" "$OUT/ab-budget.tgz" 2>/dev/null
fi
if [[ -n ${HARNESSES:-} ]]; then
  for t in .gpu/tests/*.test; do
    # gpu_backend harnesses ran above.
    [[ $(basename "$t") == gpu_backend* ]] && continue
    timeout 120 "$t" gpu_ --test-threads=1 >"$OUT/$(basename "$t").log" 2>&1
    echo "$(basename "$t") rc=$?: $(grep -E '^test result' "$OUT/$(basename "$t").log" | tail -1)"
  done
fi
# The device tool returns few files: everything in one archive.
(cd "$OUT" && tar czf ../results.tgz . && rm -rf ./* && mv ../results.tgz .)
