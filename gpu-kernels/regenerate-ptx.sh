#!/usr/bin/env bash
# Compiles gpu-kernels/cuda/*.cu to PTX with the pinned nvcc from PyPI
# (DESIGN.md, "GPU kernels") and writes gpu-kernels/ptx/*.ptx.
#
#   gpu-kernels/regenerate-ptx.sh            # rewrite the committed PTX
#   gpu-kernels/regenerate-ptx.sh --check    # regenerate into a temporary folder and
#                                            # fail if it differs from the committed PTX
#
# The venv is kept in $HEMEM_NVCC_VENV (default: .whl/nvcc-13.0.88 at the
# repository root, git-ignored) and created on first use; pip must reach PyPI.
# nvvm is pinned too: an unpinned install pulls nvvm 13.5, whose PTX 9.5 the
# CUDA 13.0 driver (R580) cannot load. -arch=compute_75 gives PTX ISA 9.0 for
# .target sm_75 (Turing), the lowest target nvcc 13 supports: ptx/<name>.ptx.
# The CKKS modules (ckks_*.cu) are compiled a second time with
# -arch=compute_90 into ptx/sm90/<name>.ptx: the same kernels with
# programmatic dependent launch's griddepcontrol instructions (sm_90 and
# newer), which Kernels::load picks on such cards.
#
# The output is deterministic: nvcc runs in a fixed scratch folder on a copy of
# each source under its bare name, so no absolute path or time stamp reaches
# the PTX, and the header's compiler-version lines depend only on the pins.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
venv=${HEMEM_NVCC_VENV:-$root/.whl/nvcc-13.0.88}
check=0
[[ ${1:-} == --check ]] && check=1

if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check \
  nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 \
  nvidia-cuda-runtime==13.0.96
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cu13=$site/nvidia/cu13
nvcc=$cu13/bin/nvcc
[[ -x $nvcc ]] || { echo "regenerate-ptx: nvcc not found at $nvcc" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/src" "$scratch/out/sm90"
cp "$here"/cuda/*.cu "$scratch/src/"
cp "$here"/cuda/*.cuh "$scratch/src/" 2>/dev/null || true
(
  cd "$scratch/src"
  for cu in *.cu; do
    "$nvcc" -ptx -arch=compute_75 -O3 "$cu" -o "../out/${cu%.cu}.ptx"
  done
  for cu in ckks_*.cu; do
    "$nvcc" -ptx -arch=compute_90 -O3 "$cu" -o "../out/sm90/${cu%.cu}.ptx"
  done
)

if [[ $check == 1 ]]; then
  status=0
  for ptx in "$scratch"/out/*.ptx "$scratch"/out/sm90/*.ptx; do
    name=${ptx#"$scratch"/out/}
    if ! diff -u "$here/ptx/$name" "$ptx" >"$scratch/diff" 2>&1; then
      echo "regenerate-ptx: gpu-kernels/ptx/$name is stale (or missing); run gpu-kernels/regenerate-ptx.sh" >&2
      head -40 "$scratch/diff" >&2
      status=1
    fi
  done
  for ptx in "$here"/ptx/*.ptx "$here"/ptx/sm90/*.ptx; do
    [[ -e $ptx ]] || continue
    name=${ptx#"$here"/ptx/}
    if [[ ! -e $scratch/out/$name ]]; then
      echo "regenerate-ptx: gpu-kernels/ptx/$name has no source in gpu-kernels/cuda/" >&2
      status=1
    fi
  done
  [[ $status == 0 ]] && echo "regenerate-ptx: committed PTX matches the sources"
  exit $status
fi

rm -f "$here"/ptx/*.ptx "$here"/ptx/sm90/*.ptx
mkdir -p "$here/ptx/sm90"
cp "$scratch"/out/*.ptx "$here/ptx/"
cp "$scratch"/out/sm90/*.ptx "$here/ptx/sm90/"
echo "regenerate-ptx: wrote $(ls "$here"/ptx/*.ptx "$here"/ptx/sm90/*.ptx | wc -l) file(s) to gpu-kernels/ptx/"
