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
#   memchecks the memory system's remaining checks (bench alloc, race, sanitize, trace);
#   perf      the CKKS bit-identity tests, then hemem bench ckks under the
#             device policy only (50 iterations, text and JSON: wall and
#             submit ms per op), for kernel work (docs/GPU-PERF.md);
#   ncu       Nsight Compute (caches flushed per kernel, as ncu does by default)
#             on two forward and two inverse NTTs of 25 limbs and on the first 40
#             kernels of one mult_relin: speed of light, memory, occupancy.
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

if want perf; then
  timeout "$(( $(left) < 240 ? $(left) : 240 ))" .gpu/tests/gpu_backend.test gpu_ --test-threads=1 \
    >"$WORK/perf-tests.log" 2>&1
  rc=$?
  grep -hE "bit-identical|panicked|FAILED|test result" "$WORK/perf-tests.log" | tail -60
  record "perf: gpu_backend tests" "rc=$rc" "perf-tests.log"
  t=$(( $(left) < 200 ? $(left) : 200 ))
  if ((t > 20)); then
    timeout "$t" .gpu/bin/hemem bench ckks --preset FGb --device gpu --policies device --iterations 50 \
      >"$WORK/perf-bench.txt" 2>"$WORK/perf-bench.err"
    rc=$?
    cat "$WORK/perf-bench.txt"; tail -3 "$WORK/perf-bench.err"
    timeout 120 .gpu/bin/hemem bench ckks --preset FGb --device gpu --policies device --iterations 50 \
      --ops ntt_forward,ntt_inverse,tensor,decompose,mult_relin,rescale,rotate,hoisted_rotate_8 --json \
      >"$WORK/bench-ckks-perf.json" 2>>"$WORK/perf-bench.err"
    record "perf: bench ckks (device)" "rc=$rc" "perf-bench.txt bench-ckks-perf.json"
  else record "perf: bench" SKIP "out of time"; fi
fi

if want ncu; then
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
  t=$(( $(left) < 240 ? $(left) : 240 ))
  if [[ -n $NCU ]] && ((t > 30)); then
    sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats)
    # The bench brackets its timed iterations with cuProfilerStart/Stop.
    timeout $((t / 2)) "$NCU" --profile-from-start off "${sections[@]}" --kernel-name regex:'ntt_' --launch-count 8 \
      --csv --page details .gpu/bin/hemem bench ckks --preset FGb --device gpu --policies device \
      --ops ntt_forward,ntt_inverse --iterations 1 --ntt-buffers 2 >"$WORK/ncu-ntt.csv" 2>"$WORK/ncu-ntt.err"
    rc1=$?
    timeout $((t / 2)) "$NCU" --profile-from-start off "${sections[@]}" --launch-count 40 --csv --page details \
      .gpu/bin/hemem bench ckks --preset FGb --device gpu --policies device --ops mult_relin --iterations 1 \
      >"$WORK/ncu-mult.csv" 2>"$WORK/ncu-mult.err"
    rc2=$?
    for f in ncu-ntt ncu-mult; do
      python3 - "$WORK/$f.csv" <<'PY' 2>/dev/null | tee "$WORK/$f.txt"
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
head = next((i for i, r in enumerate(rows) if 'Kernel Name' in r), None)
if head is None: sys.exit()
h = rows[head]; k, m, v = h.index('Kernel Name'), h.index('Metric Name'), h.index('Metric Value')
want = {'Duration', 'DRAM Throughput', 'Memory Throughput', 'Compute (SM) Throughput', 'Achieved Occupancy', 'L2 Hit Rate', 'Registers Per Thread'}
seen = collections.OrderedDict()
for r in rows[head + 1:]:
    if len(r) > v and r[m] in want: seen.setdefault(r[k][:40], {})[r[m]] = r[v]
for name, d in seen.items(): print(name, ' '.join(f'{a}={b}' for a, b in d.items()))
PY
    done
    record ncu "rc=$rc1/$rc2" "ncu-ntt.txt ncu-mult.txt (csv in results.tgz)"
  else record ncu SKIP "no ncu or out of time"; fi
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
cp "$WORK"/perf-bench.txt "$WORK"/ncu-*.txt "$OUT/" 2>/dev/null || true
