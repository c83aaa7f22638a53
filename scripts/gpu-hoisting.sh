#!/usr/bin/env bash
# GPU runs for double hoisting (issue 13), after
#   ../shared/tools/gpu-stage -p hemem-ckks -p hemem-bootstrap --test gpu_backend --test gpu_planned
#   cargo build --release -p hemem-bootstrap --example stage_times --example cts_hoisting
#   cp "$CARGO_TARGET_DIR"/release/examples/{stage_times,cts_hoisting} .gpu/bin/
# Usage on the GPU machine, from the repository root: OUT=/folder bash scripts/gpu-hoisting.sh
# 1. bit identity: the evaluator comparisons (the extended-basis operations
#    among them), the compact expansion and the planned-policy tests;
# 2. FGb bootstraps (`device` policy) with single, auto and double hoisting,
#    alternated, in one process each;
# 3. CoeffToSlot alone, single and double alternated in one process; stage
#    times with single and auto hoisting.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
HEMEM_REQUIRE_GPU=1 timeout 150 .gpu/tests/gpu_backend.test gpu_evaluator gpu_compact --test-threads=1 --nocapture >"$OUT/gpu_backend.log" 2>&1
echo "gpu_backend rc=$?"; grep -E "double-hoisted|test result|FAILED|panicked" "$OUT/gpu_backend.log" | tail -8
HEMEM_REQUIRE_GPU=1 timeout 60 .gpu/tests/gpu_planned.test gpu_ --test-threads=1 >"$OUT/gpu_planned.log" 2>&1
echo "gpu_planned rc=$?"; grep -E "test result|FAILED|panicked" "$OUT/gpu_planned.log" | tail -4
fgb() { # hoisting round
  timeout 60 .gpu/bin/hemem bootstrap --preset FGb --device gpu --policy device --iterations 7 \
    --hoisting "$1" --json >"$OUT/fgb-$1-$2.json" 2>"$OUT/fgb-$1-$2.err"
  echo "fgb $1 round $2 rc=$?"
  python3 -c "import json,sys;r=json.load(open(sys.argv[1]));print(r.get('hoisting'),'median',r['median_ms'],'runs',[round(x,1) for x in r['bootstrap_ms']],'bits',round(r['precision_bits'],2),'setup',round(r.get('key_setup_ms',0)))" "$OUT/fgb-$1-$2.json"
}
for h in single auto double; do fgb "$h" 1; done
echo "== cts_hoisting FGb"
HEMEM_MEMORY_POLICY=device timeout 60 .gpu/bin/cts_hoisting FGb 9 gpu 2>&1 | tail -2
for h in single auto; do
  echo "== stage_times FGb $h"
  HEMEM_MEMORY_POLICY=device timeout 45 .gpu/bin/stage_times FGb 4 gpu "$h" 2>&1 | tail -3
done
if (( SECONDS < 170 )); then for h in auto single; do fgb "$h" 2; done; fi
echo "elapsed ${SECONDS}s"
