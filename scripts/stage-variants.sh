#!/usr/bin/env bash
# Stages several builds of hemem side by side for one device call (issue 13's
# kernel levers): for each REV (a branch or commit), a worktree is built in
# its own target folder and its `hemem` binary and `gpu_backend` test harness
# are copied to .gpu/bin/hemem-NAME and .gpu/tests/gpu_backend-NAME.test
# (NAME: the REV with `/` turned to `-`), in a fresh .gpu/ (four variants
# take 50 MB of the 64 MiB a device call carries).
#
#   scripts/stage-variants.sh REV...          e.g. main ntt-loop conv-pairs
#
# Then, on the GPU machine: `OUT=... bash scripts/gpu-lever.sh ROUNDS
# hemem-main hemem-ntt-loop hemem-conv-pairs` runs every staged
# gpu_backend-NAME harness before the A/B. Worktrees live under
# ${HEMEM_VARIANTS:-/tmp/hemem-variants}; each keeps its target folder, so
# a second staging rebuilds only what changed.
#
# Two optional settings:
#   TESTS="PACKAGE:TARGET ..."   also stage those test harnesses of every
#       variant whose tree has them, as .gpu/tests/TARGET-NAME.test
#       (gpu-lever.sh runs them with HARNESSES=1);
#   ALIASES="ALIAS=NAME:VAR=VALUE ..."   a staged binary hemem-ALIAS that
#       runs hemem-NAME with VAR=VALUE (one build, two settings: e.g.
#       pdl-off=pdl:HEMEM_DEPENDENT_LAUNCH=off as the baseline of branch pdl).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
base=${HEMEM_VARIANTS:-/tmp/hemem-variants}
# The settings are checked before .gpu/ is wiped.
for spec in ${TESTS:-}; do
  [[ $spec =~ ^[A-Za-z0-9_-]+:[A-Za-z0-9_]+$ ]] || { echo "TESTS: $spec is not PACKAGE:TARGET" >&2; exit 1; }
done
for alias in ${ALIASES:-}; do
  [[ $alias =~ ^[A-Za-z0-9_.-]+=[A-Za-z0-9_.-]+:[A-Z_][A-Z0-9_]*=[A-Za-z0-9_.,:/-]*$ ]] ||
    { echo "ALIASES: $alias is not ALIAS=NAME:VAR=VALUE" >&2; exit 1; }
done
# Builds PACKAGE's test TARGET in TREE (its own target folder DIR) and
# stages the harness, stripped, as .gpu/tests/DEST.test.
stage_test() {
  local tree=$1 dir=$2 package=$3 test=$4 dest=$5 json exe
  json=$(mktemp)
  (cd "$tree" && CARGO_TARGET_DIR=$dir cargo test --release -p "$package" --test "$test" \
    --no-run --message-format=json -q >"$json")
  exe=$(python3 - "$json" "$test" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[2]:
        print(m["executable"])
PY
)
  rm -f "$json"
  cp "$exe" ".gpu/tests/$dest.test"
  strip ".gpu/tests/$dest.test"
}
mkdir -p "$base"
# Worktrees whose folders are gone (a wiped /tmp) are forgotten first.
git worktree prune
rm -rf .gpu && mkdir -p .gpu/bin .gpu/tests
for rev in "$@"; do
  name=${rev//\//-}
  tree="$base/$name"
  if [[ -d $tree ]]; then
    git -C "$tree" checkout -q --detach "$rev"
  else
    git worktree add -q --detach "$tree" "$rev"
  fi
  target="$base/target-$name"
  (cd "$tree" && CARGO_TARGET_DIR=$target cargo build --release -p hemem --bin hemem -q)
  cp "$target/release/hemem" ".gpu/bin/hemem-$name"
  strip ".gpu/bin/hemem-$name"
  stage_test "$tree" "$target" hemem-ckks gpu_backend "gpu_backend-$name"
  echo "staged $rev ($(git -C "$tree" rev-parse --short HEAD)) as hemem-$name"
  for spec in ${TESTS:-}; do
    package=${spec%%:*} test=${spec#*:}
    # Only where this tree's PACKAGE has that test target.
    has=$(cd "$tree" && cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
package, test = sys.argv[1], sys.argv[2]
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == package and any(t["name"] == test and "test" in t["kind"] for t in p["targets"]):
        print("yes")' "$package" "$test")
    [[ $has == yes ]] || continue
    stage_test "$tree" "$target" "$package" "$test" "$test-$name"
    echo "  with $test-$name.test"
  done
done
for alias in ${ALIASES:-}; do
  short=${alias%%=*} rest=${alias#*=}
  target_name=${rest%%:*} setting=${rest#*:}
  [[ -x .gpu/bin/hemem-$target_name ]] || { echo "alias $short: hemem-$target_name is not staged" >&2; exit 1; }
  printf '#!/usr/bin/env bash\n%s exec "$(dirname "$0")/hemem-%s" "$@"\n' "$setting" "$target_name" >".gpu/bin/hemem-$short"
  chmod +x ".gpu/bin/hemem-$short"
  echo "staged hemem-$short: hemem-$target_name with $setting"
done
du -sh .gpu
