#!/usr/bin/env bash
# The memory system's GPU checks (issue 4), in one bounded batch for the GPU
# machine (CUDA 13.0 driver, compute-sanitizer, libcupti; no Rust, no network).
#
# On the CPU machine, stage the binaries first:
#
#   ../shared/tools/gpu-stage -p hemem-memory -p hemem-gpu-kernels
#
# then, on the GPU machine, from the repository root (with .gpu/ copied over):
#
#   OUT=/some/folder bash scripts/gpu-checks-memory.sh [STEP...]
#
# STEPs (default: all, in this order): tests bench race sanitize trace.
#
# Steps (each under a timeout; the whole run stops starting new steps after
# about 5.5 minutes):
#   tests    the staged gpu_* tests with HEMEM_REQUIRE_GPU=1 (a missing GPU fails);
#   bench    hemem bench alloc (CSV + PNG);
#   race     the deliberately unordered cross-stream variant under memcheck
#            (must be flagged: shows the check works);
#   sanitize compute-sanitizer memcheck --track-stream-ordered-races all and
#            racecheck over the library's GPU tests (must be clean);
#   trace    a traced demo run (CPU) and hemem trace analyze.
# Logs and results go to $OUT; a summary table ends the output (and is saved
# as $OUT/summary.txt). Exit status: 0 when every step passed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-gpu-checks-out}
mkdir -p "$OUT"
START=$(date +%s)
DEADLINE=$((START + 330))
SUMMARY=()
FAILED=0
STEPS=${*:-tests bench race sanitize trace}
want() { [[ " $STEPS " == *" $1 "* ]]; }

note() { echo "== $*" | tee -a "$OUT/checks.log"; }
record() { # name status detail
  SUMMARY+=("$(printf '%-44s %-8s %s' "$1" "$2" "$3")")
  [[ $2 == PASS || $2 == INFO ]] || FAILED=1
}
budget() { # the step's timeout, bounded by the global deadline
  local want=$1 left=$((DEADLINE - $(date +%s)))
  ((left < want)) && want=$left
  echo "$want"
}

# --- environment -----------------------------------------------------------
[[ -d .gpu/tests && -x .gpu/bin/hemem ]] || {
  echo "no staged binaries: run ../shared/tools/gpu-stage -p hemem-memory -p hemem-gpu-kernels first" >&2
  exit 2
}
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 /usr/local/cuda-13*/extras/CUPTI/lib64 \
  /usr/local/cuda-13*/lib64 /usr/lib/x86_64-linux-gnu; do
  if compgen -G "$d/libcupti.so*" >/dev/null; then
    export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    break
  fi
done
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "compute-sanitizer: ${SANITIZER:-missing}"
  ls -la .gpu/tests .gpu/bin
} >"$OUT/env.log" 2>&1
note "environment: $(head -3 "$OUT/env.log" | tail -1)"
export HEMEM_REQUIRE_GPU=1
export RUST_BACKTRACE=1

# --- tests: the GPU tests --------------------------------------------------
if want tests; then
for t in .gpu/tests/*; do
  name=$(basename "$t")
  log="$OUT/tests-$name.log"
  limit=$(budget 150)
  if ((limit <= 0)); then record "tests $name" SKIPPED "out of time"; continue; fi
  note "tests: $name gpu_ (timeout ${limit}s)"
  timeout "$limit" "$t" gpu_ --test-threads=1 --nocapture >"$log" 2>&1
  rc=$?
  tail -n 40 "$log"
  result=$(grep -E '^test result:' "$log" | tail -1 | sed 's/^test result: //')
  skips=$(grep -c '^SKIP ' "$log")
  if ((rc == 0 && skips == 0)); then
    record "tests $name" PASS "${result:-no tests}"
  else
    record "tests $name" FAIL "rc=$rc skips=$skips ${result:-}"
  fi
done
fi

# --- bench: the micro-benchmark --------------------------------------------
if want bench; then
limit=$(budget 150)
if ((limit > 0)); then
  note "bench alloc (timeout ${limit}s)"
  timeout "$limit" .gpu/bin/hemem bench alloc --out "$OUT/bench-alloc" --passes 2 \
    >"$OUT/bench-alloc.log" 2>&1
  rc=$?
  cat "$OUT/bench-alloc.log"
  if ((rc == 0)) && [[ -s $OUT/bench-alloc/bench-alloc.csv && -s $OUT/bench-alloc/bench-alloc.png ]]; then
    record "bench alloc" PASS "$OUT/bench-alloc/{alloc-latency,copy-latency,bench-alloc}.csv + png"
  else
    record "bench alloc" FAIL "rc=$rc"
  fi
else
  record "bench alloc" SKIPPED "out of time"
fi
fi

# --- race: the deliberately unordered variant must be flagged --------------
if want race; then
label=memcheck-deliberate-race
limit=$(budget 90)
if [[ -n $SANITIZER ]] && ((limit > 0)); then
  note "$label: the unordered cross-stream use must be reported"
  timeout "$limit" "$SANITIZER" --tool memcheck --track-stream-ordered-races all --error-exitcode 99 \
    --log-file "$OUT/$label.log" .gpu/tests/gpu_stream_order.test gpu_race_unordered_cross_stream_use \
    --ignored --exact --test-threads=1 >"$OUT/$label.stdout" 2>&1
  rc=$?
  tail -n 12 "$OUT/$label.log"
  summary=$(grep -E 'ERROR SUMMARY' "$OUT/$label.log" | tail -1)
  if ((rc == 99)); then
    kind=$(grep -oiE 'stream.ordered[a-z -]*|use.after.free|use.before.alloc' "$OUT/$label.log" | head -1)
    record "$label" PASS "flagged as expected (${kind:-errors reported}): ${summary:-}"
  else
    record "$label" FAIL "not flagged (rc=$rc) ${summary:-}"
  fi
else
  record "$label" FAIL "compute-sanitizer missing or out of time"
fi
fi

# --- sanitize: the library's own code must be clean ------------------------
if want sanitize; then
sanitize() { # tool label binary [extra sanitizer args...]
  local tool=$1 label=$2 bin=$3
  shift 3
  local log="$OUT/$label.log" limit
  limit=$(budget 120)
  if [[ -z $SANITIZER ]]; then record "$label" FAIL "compute-sanitizer not found"; return; fi
  if [[ ! -x $bin ]]; then record "$label" FAIL "missing $bin"; return; fi
  if ((limit <= 0)); then record "$label" SKIPPED "out of time"; return; fi
  note "$label: compute-sanitizer --tool $tool $* $(basename "$bin") (timeout ${limit}s)"
  timeout "$limit" "$SANITIZER" --tool "$tool" "$@" --error-exitcode 99 --log-file "$log" \
    "$bin" gpu_ --test-threads=1 >"$OUT/$label.stdout" 2>&1
  local rc=$?
  tail -n 5 "$log"
  local summary
  summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)
  if ((rc == 0)); then
    record "$label" PASS "${summary:-clean}"
  else
    record "$label" FAIL "rc=$rc ${summary:-see $log}"
  fi
}
for name in gpu_streams gpu_stream_order gpu_touch gpu_residency gpu_policies gpu_device; do
  sanitize memcheck "memcheck-$name" ".gpu/tests/$name.test" --track-stream-ordered-races all
done
for name in gpu_touch gpu_stream_order; do
  sanitize racecheck "racecheck-$name" ".gpu/tests/$name.test"
done
fi

# --- trace: a traced demo and its analysis ------------------------------
if want trace; then
limit=$(budget 60)
if ((limit > 0)); then
  note "demo with --record-trace, then trace analyze (CPU; records host allocations)"
  {
    timeout "$limit" .gpu/bin/hemem demo --preset test-FTb --record-trace "$OUT/demo-trace.csv" &&
      timeout 30 .gpu/bin/hemem trace analyze "$OUT/demo-trace.csv" --out "$OUT"
  } >"$OUT/trace-analyze.log" 2>&1
  rc=$?
  tail -n 25 "$OUT/trace-analyze.log"
  if ((rc == 0)); then record "demo trace + trace analyze" INFO "CPU run: host allocations"; else
    record "demo trace + trace analyze" FAIL "rc=$rc"
  fi
fi
fi

# --- summary ---------------------------------------------------------------
{
  echo
  echo "memory-system GPU checks, $(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - START)) s"
  printf '%-44s %-8s %s\n' check status detail
  printf '%s\n' "${SUMMARY[@]}"
} | tee "$OUT/summary.txt"
exit $FAILED
