#!/usr/bin/env bash
# `pip install .` as a PyTorch user does it, then the seed-style Horovod
# script (tests/python/workers/seed_five_steps.py with only its import line
# changed) at 4 ranks through the khorovodrun that pip installed, with no
# PYTHONPATH and nothing from a CMake build directory:
#   pypi    a venv from /usr/bin/python3 with PyPI's torch (python/torch-pin.txt)
#           from the wheel cache; khorovod built with the GPU backends
#           (--cuda, as the worker image's wheel), which on this CPU-only
#           machine proves the wheel loads CUDA/NCCL from torch's wheels
#           and runs without a driver;
#   debian  a venv over /usr/bin/python3 with --system-site-packages, so
#           Debian's python3-torch; khorovod built without GPU backends.
# The venv with torch installed is cached per torch version and interpreter
# in ~/.cache/khorovod/venv/ (installing 4 GB of wheels takes minutes); each
# run uninstalls khorovod from it first, so the install under test is fresh.
# The builds reuse build/wheel*/ in the clone (incremental) and ccache.
# Prints "pip-install: N passed, M failed" last; exit status 0 iff all passed.
# Usage: tests/python/pip_install.sh [pypi] [debian]   (default: both)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${KHOROVOD_CACHE:-$HOME/.cache/khorovod}
cases=("$@"); [ ${#cases[@]} -gt 0 ] || cases=(pypi debian)
passed=0; failed=0
export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache} CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=1
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER=ccache
unset PYTHONPATH KHOROVODRUN
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

torch_dir=$(bash "$root/scripts/python-wheels.sh" --download-only | tail -1) || {
  echo "pip-install: torch wheels unavailable"; echo "pip-install: 0 passed, 1 failed"; exit 1; }
pybuild="$cache/wheels/pybuild"
torch_version=${torch_dir##*/torch-}

# venv DIR ARGS...: a complete venv at DIR (made once; .complete marks it).
venv() {
  local dir=$1; shift
  [ -f "$dir/.complete" ] && return 0
  rm -rf "$dir"
  /usr/bin/python3 -m venv "$@" "$dir" || return 1
  touch "$dir/.complete"
}

# seed VENV: the seed script with the import changed, 4 ranks, venv only.
seed() {
  local bin=$1/bin
  sed 's/^import horovod\.torch as hvd$/import khorovod.torch as hvd/' \
    "$root/tests/python/workers/seed_five_steps.py" > "$work/train.py"
  (cd "$work" && env -u PYTHONPATH PATH="$bin:/usr/bin:/bin" OMP_NUM_THREADS=1 \
     timeout 300 "$bin/khorovodrun" -np 4 "$bin/python" train.py) > "$work/seed.log" 2>&1
  local rc=$?
  cat "$work/seed.log"
  [ "$rc" = 0 ] && [ "$(grep -cE 'Epoch [0-9]: loss=[0-9.]+' "$work/seed.log")" = 5 ]
}

# install VENV BUILD_DIR [pip -C args...]: pip install . into VENV.
install_here() {
  local dir=$1 build=$2; shift 2
  "$dir/bin/python" -m pip uninstall --quiet --yes khorovod >/dev/null 2>&1
  (cd "$root" && timeout 1500 nice -n 5 "$dir/bin/python" -m pip install --quiet \
     --disable-pip-version-check --no-index --find-links "$pybuild" \
     "--config-settings=build-dir=$build/{wheel_tag}" "$@" .)
}

run_case() {
  local name=$1; shift
  echo "== pip-install ($name)"
  if "$@"; then echo "pip-install: $name passed"; passed=$((passed + 1))
  else echo "pip-install: $name FAILED"; failed=$((failed + 1)); fi
}

case_pypi() {
  local dir="$cache/venv/torch-$torch_version-py3.11"
  venv "$dir" || return 1
  if [ ! -f "$dir/.torch" ]; then
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
      --find-links "$torch_dir" -r "$root/python/torch-pin.txt" || return 1
    touch "$dir/.torch"
  fi
  local prefix; prefix=$(bash "$root/scripts/install-cuda.sh" | tail -1) || return 1
  install_here "$dir" build/wheel-cuda --config-settings=cmake.define.KHOROVOD_WITH_NCCL=ON \
    "--config-settings=cmake.define.KHOROVOD_CUDA_ROOT=$prefix" || return 1
  local v; v=$("$dir/bin/python" -c 'import torch, khorovod.torch as hvd; print(torch.__version__, hvd.nccl_built())') || return 1
  echo "torch, nccl_built: $v"
  # nccl_built() is NCCL's version code, as Horovod's (0 without NCCL).
  case $v in "$torch_version"*" "[1-9]*) ;; *) echo "expected torch $torch_version with NCCL built"; return 1 ;; esac
  seed "$dir"
}

case_debian() {
  local dir="$cache/venv/debian-python3-torch"
  venv "$dir" --system-site-packages || return 1
  install_here "$dir" build/wheel || return 1
  "$dir/bin/python" -c 'import torch; print("torch", torch.__version__, torch.__file__)' || return 1
  seed "$dir"
}

for c in "${cases[@]}"; do
  case $c in
    pypi) run_case pypi case_pypi ;;
    debian) run_case debian case_debian ;;
    *) echo "pip-install: unknown case $c"; failed=$((failed + 1)) ;;
  esac
done
echo "pip-install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
