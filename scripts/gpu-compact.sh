#!/usr/bin/env bash
# GPU runs for issue 10 (compact data), after
#   ../shared/tools/gpu-stage -p hemem-ckks -p hemem-bootstrap
# (optionally with a baseline build copied to .gpu/bin/hemem-base). Usage on
# the GPU machine, from the repository root:
#   OUT=/folder bash scripts/gpu-compact.sh STEP...
# STEPs:
#   tests        every staged CKKS/bootstrap harness's gpu_* tests (HEMEM_REQUIRE_GPU=1)
#   sanitize     compute-sanitizer memcheck on the seeded-generator and expansion tests (N = 2^12)
#   bench        hemem bench ckks on FGb: key switch with stored vs seeded keys, mult, rotate
#   boot:BIN:PRESET[:ITER]   hemem bootstrap --device gpu --policy device (BIN: hemem or hemem-base)
#   bud:BIN:POLICY:BUDGET[:PRESET[:BATCH]]  the same under a device budget (BATCH: --batch)
# Each run's JSON lands in $OUT/runs.tgz; a one-line summary per run is printed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
FINAL=${OUT:-gpu-out}; OUT="$FINAL/runs"; mkdir -p "$OUT"
export RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
summary() { # json file
  python3 - "$1" <<'PY' 2>&1 | tail -3
import json, sys
r = json.load(open(sys.argv[1]))
keys = ['preset', 'memory_policy', 'batch', 'diagonal_storage', 'median_ms', 'precision_bits', 'key_setup_ms', 'key_set_bytes', 'constant_bytes', 'peak_device_resident_bytes', 'peak_rss_bytes', 'to_device_bytes']
print({k: r.get(k) for k in keys})
print('runs', r.get('bootstrap_ms'), 'device peak by class', r.get('peak_device_bytes_by_class'))
PY
}
run() { # name timeout bin args...
  local name=$1 t=$2 bin=$3; shift 3
  echo "== $name: $bin $*"
  timeout "$t" ".gpu/bin/$bin" "$@" --json >"$OUT/$name.json" 2>"$OUT/$name.err"
  echo "rc=$?"; tail -3 "$OUT/$name.err"; summary "$OUT/$name.json"
}
for step in "$@"; do
  case $step in
    tests)
      for t in .gpu/tests/gpu_backend* .gpu/tests/bootstrap*; do
        [[ -x $t ]] || continue
        echo "== $t gpu_"
        HEMEM_REQUIRE_GPU=1 timeout 300 "$t" gpu_ --test-threads=1 >"$OUT/$(basename "$t").log" 2>&1
        echo "rc=$?"; grep -E "^test .*(FAILED|ok)$|test result|panicked" "$OUT/$(basename "$t").log" | grep -v " ok$" | tail -15
        grep -cE "^test .* ok$" "$OUT/$(basename "$t").log"
      done ;;
    sanitize)
      S=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
      for t in .gpu/tests/gpu_backend*; do
        echo "== memcheck $t"
        HEMEM_REQUIRE_GPU=1 timeout 300 "$S" --tool memcheck --leak-check no "$t" logn12 --test-threads=1 >"$OUT/sanitize.log" 2>&1
        echo "rc=$?"; grep -E "ERROR SUMMARY|test result" "$OUT/sanitize.log" | tail -3
      done ;;
    bench)
      echo "== bench ckks FGb"
      timeout 200 .gpu/bin/hemem bench ckks --preset FGb --device gpu --iterations 20 --policies device \
        --ops key_switch,key_switch_compressed,expand_key,mult_relin,rotate,ntt_forward >"$OUT/bench.txt" 2>&1
      echo "rc=$?"; tail -14 "$OUT/bench.txt" ;;
    boot:*) # boot:BIN:PRESET[:ITER[:DIAGONALS]]
      IFS=: read -r _ bin preset iter diag <<<"$step"
      extra=(); [[ -n ${diag:-} ]] && extra=(--diagonals "$diag")
      run "boot-$bin-$preset${diag:+-$diag}" 240 "$bin" bootstrap --preset "$preset" --device gpu --policy device --iterations "${iter:-5}" "${extra[@]}" ;;
    card:*) # card:FREE:PRESET[:DIAGONALS]: a ballast leaves only FREE on the GPU (a
      # real ceiling), then the device policy bootstraps with the automatic
      # budget (what is free once its context exists, less a margin)
      IFS=: read -r _ free preset diag <<<"$step"
      python3 scripts/ballast.py "$free" >"$OUT/ballast.log" 2>&1 &
      bpid=$!
      for _ in $(seq 60); do grep -q "ballast:" "$OUT/ballast.log" && break; sleep 1; done
      cat "$OUT/ballast.log"
      extra=(); [[ -n ${diag:-} ]] && extra=(--diagonals "$diag")
      run "card-$free-$preset${diag:+-$diag}" 240 hemem bootstrap --preset "$preset" --device gpu --policy device --budget auto --iterations 5 "${extra[@]}"
      python3 -c "import json;r=json.load(open('$OUT/card-$free-$preset${diag:+-$diag}.json'));print('budget', r.get('device_budget_bytes'))"
      kill "$bpid"; wait "$bpid" 2>/dev/null ;;
    boot+:*) # boot+:PRESET:ARGS...: hemem bootstrap with extra arguments (commas for spaces)
      IFS=: read -r _ preset args <<<"$step"
      run "bootx-$preset-${args//[^a-zA-Z0-9.-]/_}" 240 hemem bootstrap --preset "$preset" --device gpu --policy device --iterations 5 ${args//,/ } ;;
    real) # the real-preset bootstrap tests (ignored on CI) on the GPU: precision per preset
      echo "== real-preset bootstrap tests (HEMEM_TEST_DEVICE=gpu)"
      HEMEM_TEST_DEVICE=gpu timeout 540 .gpu/tests/bootstrap.test --ignored real_ --test-threads=1 --nocapture >"$OUT/real.log" 2>&1
      echo "rc=$?"; grep -E "^test |bits|test result|panicked" "$OUT/real.log" | tail -30 ;;
    keys:*) # keys:PRESET: hemem keygen to a file, then two bootstraps loading it
      preset=${step#keys:}; f=/tmp/hemem-$preset.keys
      echo "== keygen $preset"
      timeout 200 .gpu/bin/hemem keygen --preset "$preset" --device gpu --out "$f" --json >"$OUT/keygen-$preset.json" 2>"$OUT/keygen-$preset.err"
      echo "rc=$?"; tail -3 "$OUT/keygen-$preset.err"; cat "$OUT/keygen-$preset.json" | head -c 600; echo; ls -l "$f"*
      for i in 1 2; do
        run "keys-$preset-$i" 200 hemem bootstrap --preset "$preset" --device gpu --policy device --iterations 2 --keys "$f"
        python3 -c "import json;r=json.load(open('$OUT/keys-$preset-$i.json'));print({k:r.get(k) for k in ['key_load_ms','key_file_bytes','constant_setup_ms']})"
      done ;;
    bud:*) # bud:BIN:POLICY:BUDGET[:PRESET[:BATCH]]
      IFS=: read -r _ bin policy budget preset batch <<<"$step"
      extra=(); [[ -n ${batch:-} ]] && extra=(--batch "$batch")
      run "bud-$bin-${preset:-FGb}-$policy-$budget${batch:+-b$batch}" 240 "$bin" bootstrap --preset "${preset:-FGb}" --device gpu --policy "$policy" --budget "$budget" --iterations 3 "${extra[@]}" ;;
  esac
done
tar czf "$FINAL/runs-$(date +%H%M%S).tgz" -C "$OUT" . && rm -rf "$OUT"
