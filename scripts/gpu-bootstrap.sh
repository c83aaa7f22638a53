#!/usr/bin/env bash
# GPU bootstrap runs (issue 6): FGb with the device policy and no budget, then
# under a 4 GiB budget with the static policy; JSON to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
FINAL=${OUT:-gpu-out}; OUT="$FINAL/boot"; mkdir -p "$OUT"
export RUST_BACKTRACE=1
run() { # name timeout args...
  local name=$1 t=$2; shift 2
  echo "== $name: hemem $*"
  timeout "$t" .gpu/bin/hemem "$@" --json >"$OUT/$name.json" 2>"$OUT/$name.err"
  echo "rc=$?"; tail -4 "$OUT/$name.err"
  python3 -c "import json;r=json.load(open('$OUT/$name.json'));print({k:r[k] for k in ['device','memory_policy','median_ms','bootstrap_ms','precision_bits','key_setup_ms','keys','key_set_bytes','constant_bytes']});print('eviction', r.get('eviction'), 'to device', r.get('to_device_bytes'), 'evicted', r.get('evicted_bytes'), 'evictions', r.get('evictions'), 'trims', r.get('pool_trims'), 'by class', r.get('last_evicted_bytes_by_class'), 'driver ms', r.get('driver_ms'));print('peak', r['peak_bytes_by_class']);print('device peak', r.get('peak_device_bytes_by_class'))" 2>&1 | tail -4
}
for step in ${*:-fgb-device}; do
  case $step in
    fgb-device) run fgb-device 150 bootstrap --preset FGb --device gpu --policy device --iterations 5 ;;
    fgb-complex) run fgb-complex 200 bootstrap --preset FGb --device gpu --policy device --iterations 3 --complex ;;
    fgb-budget) run fgb-budget 240 bootstrap --preset FGb --device gpu --policy static --budget 4GiB --iterations 2 ;;
    ftb-device) run ftb-device 90 bootstrap --preset FTb --device gpu --policy device --iterations 5 ;;
    cupti) timeout 120 .gpu/tests/gpu_residency_cupti.test --nocapture 2>&1 | tail -12 ;;
    dev:*) # dev:PRESET or dev:PRESET:complex, device policy, 3 iterations
      IFS=: read -r _ preset kind <<<"$step"
      extra=(); [[ $kind == complex ]] && extra=(--complex)
      run "dev-$preset${kind:+-$kind}" 120 bootstrap --preset "$preset" --device gpu --policy device --iterations 3 "${extra[@]}" ;;
    bud:*) # bud:POLICY:BUDGET[:PRESET[:EVICTION]], 3 iterations
      IFS=: read -r _ policy budget preset eviction <<<"$step"
      preset=${preset:-FGb}
      extra=(); [[ -n $eviction ]] && extra=(--eviction "$eviction")
      run "bud-$preset-$policy-$budget${eviction:+-$eviction}" 200 bootstrap --preset "$preset" --device gpu --policy "$policy" --budget "$budget" --iterations 3 "${extra[@]}" ;;
    chain:*) # chain:PRESET: ten bootstraps in a chain, precision of each
      preset=${step#chain:}
      run "chain-$preset" 240 bootstrap --preset "$preset" --device gpu --policy device --iterations 10 --chain ;;
    real) # the real-preset bootstrap tests (ignored on CI), on the GPU
      echo "== real-preset bootstrap tests (HEMEM_TEST_DEVICE=gpu)"
      HEMEM_TEST_DEVICE=gpu timeout 420 .gpu/tests/bootstrap.test --ignored real_ --test-threads=1 --nocapture >"$OUT/real.log" 2>&1
      echo "rc=$?"; grep -E "^test |bits|test result|panicked" "$OUT/real.log" | tail -30 ;;
    demo) # the README's demo on the GPU (FGb bootstraps)
      echo "== demo --device gpu --preset FGb"
      timeout 200 .gpu/bin/hemem demo --device gpu --preset FGb --json >"$OUT/demo.json" 2>"$OUT/demo.err"
      echo "rc=$?"; tail -12 "$OUT/demo.err" ;;
    bench-static) timeout 150 .gpu/bin/hemem bench ckks --preset FGb --device gpu --iterations 20 --policies device,static 2>&1 | tail -22 ;;
  esac
done
# The device tool returns at most 8 files: pack the runs.
tar czf "$FINAL/boot-$(date +%H%M%S).tgz" -C "$OUT" . && rm -rf "$OUT"
