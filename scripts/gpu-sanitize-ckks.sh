#!/usr/bin/env bash
# compute-sanitizer's memcheck (with stream-ordered races), racecheck and
# synccheck over the CKKS GPU tests at N = 2^12 that launch the conversion,
# NTT, arithmetic and key-switching kernels (staged gpu_backend.test):
#
#   OUT=/folder bash scripts/gpu-sanitize-ckks.sh
#
# Prints each tool's ERROR SUMMARY (or racecheck's hazard summary); logs in $OUT.
set -u
mkdir -p "$OUT"
export HEMEM_REQUIRE_GPU=1
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
tests=(gpu_primitives_match_cpu_logn12 gpu_evaluator_matches_cpu_logn12 gpu_compressed_key_switch_matches_cpu_logn12
  gpu_seeded_inner_product_matches_cpu_logn12 gpu_periodic_products_match_cpu_logn12)
for tool in memcheck racecheck synccheck; do
  extra=()
  [[ $tool == memcheck ]] && extra=(--track-stream-ordered-races all)
  start=$(date +%s)
  timeout 170 "$SANITIZER" --tool "$tool" "${extra[@]}" --error-exitcode 99 --log-file "$OUT/$tool.log" \
    .gpu/tests/gpu_backend.test "${tests[@]}" --exact --test-threads=1 >"$OUT/$tool.stdout" 2>&1
  rc=$?
  echo "$tool rc=$rc ($(( $(date +%s) - start )) s): $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' "$OUT/$tool.log" | tail -1) $(grep -E '^test result' "$OUT/$tool.stdout")"
done
