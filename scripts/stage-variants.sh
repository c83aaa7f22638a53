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
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
base=${HEMEM_VARIANTS:-/tmp/hemem-variants}
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
  json=$(mktemp)
  (cd "$tree" && CARGO_TARGET_DIR=$target cargo build --release -p hemem --bin hemem -q &&
    CARGO_TARGET_DIR=$target cargo test --release -p hemem-ckks --test gpu_backend --no-run \
      --message-format=json -q >"$json")
  harness=$(python3 - "$json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu_backend":
        print(m["executable"])
PY
)
  rm -f "$json"
  cp "$target/release/hemem" ".gpu/bin/hemem-$name"
  cp "$harness" ".gpu/tests/gpu_backend-$name.test"
  strip ".gpu/bin/hemem-$name" ".gpu/tests/gpu_backend-$name.test"
  echo "staged $rev ($(git -C "$tree" rev-parse --short HEAD)) as hemem-$name"
done
du -sh .gpu
