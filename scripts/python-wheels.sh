#!/usr/bin/env bash
# The wheels a PyTorch worker runs from, cached outside the clone:
#   ~/.cache/khorovod/wheels/torch-<version>/  the pinned PyPI torch
#       (python/torch-pin.txt) with every dependency, NVIDIA's CUDA wheels
#       included (~4 GB), cp311 manylinux x86_64; complete once .complete exists
#   ~/.cache/khorovod/wheels/pybuild/          pip's build requirements for
#       khorovod (scikit-build-core, pybind11), so builds need no index
# and, unless --download-only, the khorovod wheel built by `pip wheel .`
# into OUTDIR (default build/python-wheels). Idempotent.
#
# Usage: scripts/python-wheels.sh [--cuda|--tensorflow] [--download-only] [OUTDIR]
#   --cuda  build the GPU backends into the wheel (NCCL and the CUDA runtime
#           from scripts/install-cuda.sh); the wheel then loads libcudart
#           (at import) and libnccl (dlopen, at the first NCCL use) from
#           torch's NVIDIA wheels (runpath), and needs them.
#   --tensorflow  build khorovod.tensorflow's ops into the wheel, against the
#           pinned tensorflow-cpu (python/tensorflow-pin.txt) of the
#           tensorflow stage's cached venv (tests/python/tensorflow/run.sh
#           --venv-only makes it), in that stage's build directory
#           (build/wheel-tf), so either one's compile serves the other. The
#           wheel then needs that TensorFlow version where it is installed.
# Install in an image or venv (no index needed):
#   pip install --no-index --find-links ~/.cache/khorovod/wheels/torch-<v> \
#       --find-links OUTDIR -r python/torch-pin.txt khorovod
# Prints the torch (--tensorflow: TensorFlow) wheel directory and the
# khorovod wheel path last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cuda=0; tensorflow=0; download_only=0; out="$root/build/python-wheels"
while [ $# -gt 0 ]; do
  case $1 in
    --cuda) cuda=1 ;;
    --tensorflow) tensorflow=1 ;;
    --download-only) download_only=1 ;;
    -*) echo "python-wheels: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done

cache=${KHOROVOD_CACHE:-$HOME/.cache/khorovod}
python=${KHOROVOD_WHEEL_PYTHON:-python3}
mapfile -t pins < <(grep -vE '^\s*(#|$)' "$root/python/torch-pin.txt")
torch_version=$(printf '%s\n' "${pins[@]}" | sed -n 's/^torch==//p')
[ -n "$torch_version" ] || { echo "python-wheels: no torch== line in python/torch-pin.txt" >&2; exit 1; }
torch_dir="$cache/wheels/torch-$torch_version"
build_dir="$cache/wheels/pybuild"
build_reqs=("scikit-build-core==0.11.6" "pybind11==2.13.6")

# download DIR SPEC...: the cp311 manylinux x86_64 wheels of SPEC and their
# dependencies, whatever the local interpreter; marks DIR complete.
download() {
  local dir=$1; shift
  [ -f "$dir/.complete" ] && return 0
  mkdir -p "$dir"
  echo "python-wheels: fetching $* into $dir"
  "$python" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --python-version 3.11 --implementation cp --abi cp311 -d "$dir" "$@"
  touch "$dir/.complete"
}
download "$build_dir" "${build_reqs[@]}"
if [ "$tensorflow" = 1 ]; then
  framework_dir=$(bash "$root/tests/python/tensorflow/run.sh" --download-only | tail -1)
else
  download "$torch_dir" "${pins[@]}"; framework_dir=$torch_dir
fi
if [ "$download_only" = 1 ]; then echo "$framework_dir"; exit 0; fi

args=(); wheel_build="build/wheel"
if [ "$cuda" = 1 ]; then
  prefix=$(bash "$root/scripts/install-cuda.sh" | tail -1)
  args=(--config-settings=cmake.define.KHOROVOD_WITH_NCCL=ON "--config-settings=cmake.define.KHOROVOD_CUDA_ROOT=$prefix")
  wheel_build="build/wheel-cuda"
elif [ "$tensorflow" = 1 ]; then
  # -E in python/tensorflow.cmake: pip's build isolation still sees the venv's TensorFlow.
  venv=$(bash "$root/tests/python/tensorflow/run.sh" --venv-only | tail -1)
  [ -x "$venv/bin/python" ] || { echo "python-wheels: no TensorFlow venv ($venv)" >&2; exit 1; }
  python=$venv/bin/python
  args=(--config-settings=cmake.define.KHOROVOD_WITH_TENSORFLOW=ON)
  wheel_build="build/wheel-tf"
fi
export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache} CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=1
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER=ccache
mkdir -p "$out"
rm -f "$out"/khorovod-*.whl
(cd "$root" && "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-index \
   --find-links "$build_dir" "--config-settings=build-dir=$wheel_build/{wheel_tag}" "${args[@]}" -w "$out" .)
echo "$framework_dir"
ls "$out"/khorovod-*.whl
