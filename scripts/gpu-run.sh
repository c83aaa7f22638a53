#!/usr/bin/env bash
# One bounded GPU-machine session for issues 4 and 5, after staging with
#
#   ../shared/tools/gpu-stage -p hemem-memory -p hemem-gpu-kernels -p hemem-ckks
#
# and copying .gpu/ over. Usage, from the repository root on the GPU machine:
#
#   OUT=/folder bash scripts/gpu-run.sh [STEP...]
#
# STEPs (default: tests bench demo sanitize):
#   tests     every staged harness's gpu_* tests (memory, kernels, CKKS backend)
#             with HEMEM_REQUIRE_GPU=1, through scripts/gpu-checks-memory.sh;
#   bench     hemem bench ckks --preset FGb (NTT bandwidth, evaluator ops, policies);
#   demo      hemem demo --device gpu on FGb and on test-FGb under a 1 GiB budget;
#   sanitize  compute-sanitizer memcheck over the CKKS GPU tests at N = 2^12;
#   memchecks the memory system's remaining checks (bench alloc, race, sanitize, trace).
# Everything is bounded by DEADLINE_S (default 540 s). Results are packed into
# $OUT/results.tgz with the summaries beside it (the device tool returns at
# most 8 files).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
WORK=$(mktemp -d)
START=$(date +%s)
DEADLINE=$((START + ${DEADLINE_S:-540}))
STEPS=${*:-tests bench demo sanitize}
want() { [[ " $STEPS " == *" $1 "* ]]; }
left() { echo $((DEADLINE - $(date +%s))); }
SUMMARY=()
record() { SUMMARY+=("$(printf '%-40s %-6s %s' "$1" "$2" "$3")"); }
export HEMEM_REQUIRE_GPU=1 RUST_BACKTRACE=1
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv >"$WORK/nvidia-smi.txt" 2>&1
head -2 "$WORK/nvidia-smi.txt"

if want tests; then
  mkdir -p "$WORK/memory"
  OUT="$WORK/memory" timeout "$(left)" bash scripts/gpu-checks-memory.sh tests >"$WORK/tests.log" 2>&1
  record tests "rc=$?" "see memory/summary.txt"
  grep -hE "^test |bit-identical|bits$|panicked|SKIP|FAILED" "$WORK"/memory/tests-gpu_backend*.log 2>/dev/null | tail -80
fi

if want bench; then
  t=$(( $(left) < 200 ? $(left) : 200 ))
  if ((t > 20)); then
    timeout "$t" .gpu/bin/hemem bench ckks --preset FGb --device gpu --iterations 20 >"$WORK/bench-ckks.txt" 2>"$WORK/bench-ckks.err"
    rc=$?
    timeout 120 .gpu/bin/hemem bench ckks --preset FGb --device gpu --iterations 20 --policies device --json >"$WORK/bench-ckks-device.json" 2>>"$WORK/bench-ckks.err"
    cat "$WORK/bench-ckks.txt"; tail -5 "$WORK/bench-ckks.err"
    record bench "rc=$rc" "bench-ckks.txt"
  else record bench SKIP "out of time"; fi
fi

if want demo; then
  t=$(( $(left) < 120 ? $(left) : 120 ))
  if ((t > 20)); then
    timeout "$t" .gpu/bin/hemem demo --device gpu --preset FGb --json >"$WORK/demo-fgb.json" 2>"$WORK/demo.err"
    rc1=$?
    timeout 60 .gpu/bin/hemem demo --device gpu --preset test-FGb --budget 1GiB --policy static --json >"$WORK/demo-budget.json" 2>>"$WORK/demo.err"
    rc2=$?
    python3 -c "import json,sys; r=json.load(open('$WORK/demo-fgb.json')); [print(s['op'], s['level'], round(s['precision_bits'],2), round(s['ms'],3)) for s in r['steps']]" 2>/dev/null
    tail -3 "$WORK/demo.err"
    record demo "rc=$rc1/$rc2" "demo-fgb.json demo-budget.json"
  else record demo SKIP "out of time"; fi
fi

if want sanitize; then
  t=$(( $(left) < 150 ? $(left) : 150 ))
  if [[ -n $SANITIZER ]] && ((t > 20)); then
    timeout "$t" "$SANITIZER" --tool memcheck --track-stream-ordered-races all --error-exitcode 99 \
      --log-file "$WORK/memcheck-ckks.log" .gpu/tests/gpu_backend.test \
      gpu_primitives_match_cpu_logn12 gpu_evaluator_matches_cpu_logn12 --test-threads=1 >"$WORK/memcheck-ckks.stdout" 2>&1
    rc=$?
    tail -3 "$WORK/memcheck-ckks.log"
    record "memcheck ckks logn12" "rc=$rc" "$(grep -E 'ERROR SUMMARY' "$WORK/memcheck-ckks.log" | tail -1)"
  else record "memcheck ckks" SKIP "no sanitizer or out of time"; fi
fi

if want memchecks; then
  mkdir -p "$WORK/memchecks"
  OUT="$WORK/memchecks" timeout "$(left)" bash scripts/gpu-checks-memory.sh bench race sanitize trace >"$WORK/memchecks.log" 2>&1
  record memchecks "rc=$?" "see memchecks/summary.txt"
fi

{
  echo "gpu-run $(date -u +%FT%TZ), $(($(date +%s) - START)) s, steps: $STEPS"
  printf '%s\n' "${SUMMARY[@]}"
  for s in "$WORK"/memory/summary.txt "$WORK"/memchecks/summary.txt; do [[ -f $s ]] && cat "$s"; done
} | tee "$OUT/summary.txt"
tar czf "$OUT/results.tgz" -C "$WORK" .
cp "$WORK"/bench-ckks*.json "$WORK"/demo-*.json "$OUT/" 2>/dev/null || true
