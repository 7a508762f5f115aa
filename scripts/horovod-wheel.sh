#!/usr/bin/env bash
# Horovod, for the side-by-side benchmark (bench/side_by_side.sh) only: the
# PyPI sdist built once with Gloo CPU ops (no MPI, no GPU, no TensorFlow or
# MXNet) against Debian's torch (python3-torch, headers from libtorch-dev),
# the same torch khorovod.torch and DDP run on in that benchmark. Cached
# outside the clone, keyed by both versions:
#   ~/.cache/khorovod/wheels/horovod-<hvd>-torch-<torch>/horovod-*.whl
#   ~/.cache/khorovod/horovod-build/horovod-<hvd>-torch-<torch>/  the unpacked
#       sdist and its build tree (an interrupted build resumes from it)
#   ~/.cache/khorovod/venv-horovod-<hvd>-torch-<torch>/   a venv that sees the
#       system site-packages (Debian's torch) with that wheel and its
#       Python dependencies installed
# The compile is long on this machine, so it runs under `nice -n 10`.
# Needs: apt-get install python3-torch libtorch-dev cmake g++.
# Usage: scripts/horovod-wheel.sh     prints the venv's python last.
set -euo pipefail
hvd_version=0.28.1
python=/usr/bin/python3
cache=${KHOROVOD_CACHE:-$HOME/.cache/khorovod}
torch_version=$("$python" -c 'import torch; print(torch.__version__.split("+")[0])') ||
  { echo "horovod-wheel: Debian's python3-torch is not installed" >&2; exit 1; }
# torch's C++ headers: for this benchmark-only build, not in install-deps.sh
# (every user's first command would fetch them).
[ -f /usr/include/torch/extension.h ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtorch-dev >/dev/null ||
  { echo "horovod-wheel: libtorch-dev (torch's C++ headers) could not be installed" >&2; exit 1; }
key="horovod-$hvd_version-torch-$torch_version"
wheels="$cache/wheels/$key"
venv="$cache/venv-$key"

# The sdist is unpacked into a fixed directory in the cache and built in
# place (pip builds local directories in-tree), so an interrupted compile
# resumes where it stopped; ccache keeps what was compiled as well.
src="$cache/horovod-build/$key/horovod-$hvd_version"
if ! ls "$wheels"/horovod-*.whl >/dev/null 2>&1; then
  if [ ! -f "$src/setup.py" ]; then
    mkdir -p "$(dirname "$src")"
    "$python" -m pip download --quiet --disable-pip-version-check --no-deps \
      --no-binary :all: "horovod==$hvd_version" -d "$(dirname "$src")"
    tar -xzf "$(dirname "$src")/horovod-$hvd_version.tar.gz" -C "$(dirname "$src")"
  fi
  echo "horovod-wheel: compiling Horovod $hvd_version against torch $torch_version (long)" >&2
  command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER=ccache \
    CMAKE_C_COMPILER_LAUNCHER=ccache CCACHE_DIR="$cache/ccache"
  mkdir -p "$wheels"
  # setup.py passes -j8 to make unless MAKEFLAGS is set: this machine has 2 cores.
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
  HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_CPU_OPERATIONS=GLOO \
  HOROVOD_GPU_OPERATIONS="" HOROVOD_WITHOUT_GPU=1 MAKEFLAGS=-j2 \
    nice -n 10 "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps \
      --no-build-isolation -w "$wheels" "$src"
fi

if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  "$python" -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheels"/horovod-*.whl
  touch "$venv/.complete"
fi
"$venv/bin/python" -c 'import horovod.torch as hvd; assert hvd.gloo_built(), "no Gloo"' ||
  { echo "horovod-wheel: the installed Horovod cannot load" >&2; exit 1; }
echo "$venv/bin/python"
