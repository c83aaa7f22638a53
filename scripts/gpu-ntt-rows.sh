#!/usr/bin/env bash
# GPU runs for the 16-point NTT rows kernels (issue 13), after, on the CPU machine:
#   ../shared/tools/gpu-stage -p hemem-ckks --test gpu_backend
#   cargo build --release -p hemem-bootstrap --example ntt_rows
#   cp "$CARGO_TARGET_DIR"/release/examples/ntt_rows .gpu/bin/
# Usage on the GPU machine, from the repository root:
#   OUT=/folder bash scripts/gpu-ntt-rows.sh
# 1. bit identity, GPU against CPU, with both rows kernels: every primitive
#    (N = 2^12, 2^16, 2^17) and every evaluator operation (N = 2^12, FGb);
# 2. radix8 (old) against radix16 (new), alternated in one process: NTT
#    25 x 2^16 both ways, mult + relinearise and rotate at FGb's top level,
#    FGb bootstraps (`device` policy) with stage times; the example asserts
#    that both variants' outputs are equal.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
HEMEM_REQUIRE_GPU=1 timeout 330 .gpu/tests/gpu_backend.test gpu_primitives gpu_evaluator \
  --test-threads=1 --nocapture >"$OUT/gpu_backend.log" 2>&1
echo "gpu_backend rc=$?"
grep -cE "bit-identical" "$OUT/gpu_backend.log" | sed 's/^/bit-identical lines: /'
grep -E "^test |test result|FAILED|panicked" "$OUT/gpu_backend.log" | tail -14
echo "== ntt_rows FGb (radix8 vs radix16, one process)"
HEMEM_MEMORY_POLICY=device timeout 230 .gpu/bin/ntt_rows FGb 7 gpu 3 >"$OUT/ntt_rows.log" 2>&1
echo "ntt_rows rc=$?"
grep -vE "^bootstrap (radix8|radix16) round" "$OUT/ntt_rows.log" | tail -12
grep -E "^bootstrap (radix8|radix16) round [1-9]" "$OUT/ntt_rows.log" | head -6
echo "elapsed ${SECONDS}s"
