#!/usr/bin/env bash
# GPU runs for issue 11 (the planned policy), after
#   ../shared/tools/gpu-stage -p hemem-memory -p hemem-ckks -p hemem-bootstrap
# Usage on the GPU machine, from the repository root:
#   OUT=/folder bash scripts/gpu-planned.sh STEP...
# STEPs:
#   tests[:NAME]  the staged gpu_* tests of the memory system, the GPU backend
#              and the planned policy (HEMEM_REQUIRE_GPU=1); NAME: one harness
#   sanitize   compute-sanitizer memcheck and racecheck on the planned-policy tests
#   bud:POLICY:BUDGET:PRESET[:BATCH[:ITER[:RESERVE]]]  hemem bootstrap under a
#              budget, copies counted by CUPTI too (BUDGET none: no budget;
#              RESERVE: HEMEM_STREAMING_RESERVE, default 2)
#   card:FREE:PRESET[:BATCH]  a ballast (cuMemAlloc) leaves only FREE on the
#              GPU, then the planned policy bootstraps with budget auto
#   ncu:PRESET[:POLICY[:BUDGET]]  Nsight Compute over the last of 2 bootstraps
#              (cuProfilerStart/Stop bracket it): each kernel's duration,
#              summed by kernel name into $FINAL/ncu-PRESET-*.txt
#   with:VAR=VAL[,VAR=VAL...]  sets HEMEM_* variables for the steps after it
#              (their runs' names carry the setting); `with:` alone clears them
#   args:ARG[,ARG...]  extra `hemem bootstrap` arguments for the bud/card steps
#              after it (e.g. args:--hoisting,single); `args:` alone clears them
# Each run's JSON lands in $OUT/runs; a one-line summary per run is printed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
FINAL=${OUT:-gpu-out}; OUT="$FINAL/runs"; mkdir -p "$OUT"
export RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
summary() { # json file
  python3 - "$1" <<'PY' 2>&1 | tail -3
import json, sys
r = json.load(open(sys.argv[1]))
keys = ['preset', 'memory_policy', 'batch', 'sub_batch', 'hoisting', 'diagonal_storage', 'keys_expanded', 'key_set_bytes', 'constant_bytes', 'streaming_plan', 'plan_departures', 'last_departure_step', 'median_ms', 'precision_bits', 'key_setup_ms', 'device_budget_bytes',
        'peak_device_resident_bytes', 'pool_peak_bytes', 'streamed_bytes', 'others_peak_bytes', 'prefetched_bytes', 'stable_bytes', 'largest_step_bytes', 'planned_fetch_bytes', 'floor_fetch_bytes', 'planned_run_ms', 'planned_stall_ms', 'window_run_ms', 'measured_compute_ms', 'measured_wait_ms', 'model_copy_gbps', 'model_copy_rate_measured', 'zero_copy_uses', 'zero_copy_bytes', 'arena_bytes', 'arena_chunks', 'pool_refusals', 'refusals_resolved_after']
print({k: r.get(k) for k in keys})
tl = r.get('gpu_timeline') or []
if tl: print('timeline', [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in t.items() if k not in ('longest_idle', 'host_calls')} for t in tl[-2:]], 'longest', [[round(g['ms'], 3), round(g['copying_ms'], 3), g['before'], g['after'], g['kernels_before'], [[c[0], round(c[1], 3)] for c in g['calls']]] for g in tl[-1]['longest_idle'][:5]])
if tl: print('host_calls', [[c[0], c[1], round(c[2], 2)] for c in tl[-1].get('host_calls', [])])
print('submit', [round(x, 1) for x in r.get('submit_ms', [])], 'prepare', [round(d.get('prepare', 0), 1) for d in r.get('driver_ms', [])])
print('runs', r.get('bootstrap_ms'), 'to_device', r.get('to_device_bytes'), 'cupti_htod', r.get('cupti_htod_bytes'), 'evictions', r.get('evictions'))
for i, u in enumerate(r.get('residency') or []): print('residency', i, u)
PY
}
TAG=""; WITH=(); ARGS=(); ATAG=""
run() { # name timeout args...
  local name=$1$TAG$ATAG t=$2; shift 2
  echo "== $name: ${WITH[*]} hemem $*"
  env "${WITH[@]}" timeout "$t" .gpu/bin/hemem "$@" --json >"$OUT/$name.json" 2>"$OUT/$name.err"
  echo "rc=$?"; tail -3 "$OUT/$name.err"; summary "$OUT/$name.json"
}
for step in "$@"; do
  case $step in
    tests|tests:*) # tests:NAME runs .gpu/tests/NAME* only
      only=${step#tests}; only=${only#:}
      list=(.gpu/tests/gpu_policies* .gpu/tests/gpu_residency* .gpu/tests/gpu_streams*
            .gpu/tests/gpu_device* .gpu/tests/gpu_planned* .gpu/tests/gpu_backend*)
      [[ -n $only ]] && list=(.gpu/tests/"$only"*)
      for t in "${list[@]}"; do
        [[ -x $t ]] || continue
        echo "== $t gpu_"
        HEMEM_REQUIRE_GPU=1 timeout 300 "$t" gpu_ --test-threads=1 --nocapture >"$OUT/$(basename "$t").log" 2>&1
        echo "rc=$?"; grep -E "^test .*(FAILED|ok)$|test result|panicked|budget|peak" "$OUT/$(basename "$t").log" | grep -v " ok$" | tail -12
      done ;;
    sanitize)
      S=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
      for tool in memcheck racecheck; do
        for t in .gpu/tests/gpu_planned* .gpu/tests/gpu_policies*; do
          echo "== $tool $t planned"
          # Pool refusals are expected API errors (the planner handles them).
          HEMEM_REQUIRE_GPU=1 HEMEM_TEST_LIGHT=1 timeout 400 "$S" --tool "$tool" --report-api-errors no \
            "$t" planned --test-threads=1 >"$OUT/$tool-$(basename "$t").log" 2>&1
          echo "rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result|panicked" "$OUT/$tool-$(basename "$t").log" | tail -3
        done
      done ;;
    bud:*) # bud:POLICY:BUDGET:PRESET[:BATCH[:ITER[:RESERVE]]]
      IFS=: read -r _ policy budget preset batch iter reserve <<<"$step"
      extra=(--cupti); [[ $budget != none ]] && extra+=(--budget "$budget")
      HEMEM_STREAMING_RESERVE=${reserve:-2} run "bud-$policy-$budget-$preset-b${batch:-1}-r${reserve:-2}" 300 bootstrap \
        --preset "$preset" --device gpu --policy "$policy" --iterations "${iter:-5}" --batch "${batch:-1}" "${extra[@]}" "${ARGS[@]}" ;;
    card:*) # card:FREE:PRESET[:BATCH]
      IFS=: read -r _ free preset batch <<<"$step"
      python3 scripts/ballast.py "$free" >"$OUT/ballast-$free.log" 2>&1 &
      bpid=$!
      for _ in $(seq 60); do grep -q "ballast:" "$OUT/ballast-$free.log" && break; sleep 1; done
      cat "$OUT/ballast-$free.log"
      run "card-$free-$preset-b${batch:-1}" 300 bootstrap --preset "$preset" --device gpu --policy planned --budget auto \
        --iterations 7 --batch "${batch:-1}" "${ARGS[@]}"
      kill "$bpid"; wait "$bpid" 2>/dev/null ;;
    ncu:*) # ncu:PRESET[:POLICY[:BUDGET]]
      IFS=: read -r _ preset policy budget <<<"$step"
      NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
      extra=(); [[ -n ${budget:-} && $budget != none ]] && extra+=(--budget "$budget")
      name="ncu-$preset-${policy:-device}-${budget:-none}$TAG$ATAG"
      echo "== $name"
      env "${WITH[@]}" timeout 420 "$NCU" --profile-from-start off --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
        --print-units base .gpu/bin/hemem bootstrap --preset "$preset" --device gpu --policy "${policy:-device}" \
        --iterations 2 "${extra[@]}" "${ARGS[@]}" >"$FINAL/$name.csv" 2>"$FINAL/$name.err"
      echo "rc=$?"; tail -2 "$FINAL/$name.err"
      python3 - "$FINAL/$name.csv" >"$FINAL/$name.txt" <<'PY'
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))
        if r.get('Metric Name') == 'gpu__time_duration.sum']
by = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    b = by[r['Kernel Name']]; b[0] += 1; b[1] += float(r['Metric Value'].replace(',', ''))
total = sum(v[1] for v in by.values())
print(f"kernels {len(rows)}, summed duration {total/1e6:.3f} ms")
for k, (n, ns) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"{ns/1e6:9.3f} ms {100*ns/total:5.1f} % {n:6d} x {ns/max(n,1)/1e3:8.2f} us  {k[:90]}")
PY
      head -30 "$FINAL/$name.txt" ;;
    args:*)
      set=${step#args:}; ARGS=(); ATAG=""
      if [[ -n $set ]]; then IFS=, read -r -a ARGS <<<"$set"; ATAG="-${set//[-=,]/_}"; fi ;;
    with:*)
      set=${step#with:}; WITH=(); TAG=""
      if [[ -n $set ]]; then IFS=, read -r -a WITH <<<"$set"; TAG="-${set//[=,]/_}"; fi ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
tar -C "$FINAL" -czf "$FINAL/runs.tgz" runs && rm -rf "$OUT"
