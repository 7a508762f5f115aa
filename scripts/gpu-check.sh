#!/usr/bin/env bash
# The GPU checks that CI cannot run (it has no GPU): khorovod's GPU tests,
# one at a time (a process that has touched CUDA must not fork, so each
# gets its own), khorovod.torch on CUDA tensors against the machine's own
# PyTorch, and the GPU fusion benchmark. Prints one line per check and a
# closing summary; exits 1 when any check failed.
#
#   scripts/gpu-check.sh pack DIR     on the build machine: copies the GPU
#       build's binaries (build/gpu, see docs/gpu.md) and the shared
#       libraries they need that a bare CUDA machine may lack into DIR
#   scripts/gpu-check.sh run DIR      on the GPU machine, from the clone's
#       root: runs the checks over DIR, with the NCCL of the machine's torch
#       wheels (or LD_LIBRARY_PATH's) and its python3/torch/pybind11/g++
#
# Environment: REPEAT (gtest repetitions, default 1), LEAK=1 adds the
# 100-cycle abort/re-init leak test (about 100 s).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
verb=${1:-}; dir=${2:-}
[ -n "$verb" ] && [ -n "$dir" ] || { sed -n 2,16p "$0"; exit 2; }

pack() {
  local build=$root/build/gpu
  mkdir -p "$dir/bin" "$dir/lib"
  for b in nccl_gpu_test runtime_gpu_test backend_unit_test khorovod-bench-gpu-fusion khorovodrun; do
    cp "$build/bin/$b" "$dir/bin/" || exit 1
  done
  cp "$build/lib/libkhorovod.so" "$dir/lib/"
  strip "$dir"/bin/* "$dir/lib/libkhorovod.so"
  # Everything they link except glibc, the C++ runtime and NCCL (the GPU
  # machine's own NCCL is used: NVIDIA's library is ~250 MB).
  ldd "$dir"/bin/* "$dir/lib/libkhorovod.so" | awk '/=> \//{print $1, $3}' | sort -u |
    while read -r name path; do
      case $name in libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libstdc++*|libgcc_s*|libnccl*|libkhorovod*) ;;
        *) cp -L "$path" "$dir/lib/" ;;
      esac
    done
  du -sh "$dir"
}

pass=0; fail=0
check() {
  local name=$1; shift
  echo "=== $name"
  local t0=$SECONDS
  timeout "${T:-150}" "$@"
  local rc=$?
  echo "=== rc=$rc $name ($((SECONDS - t0)) s)"
  if [ $rc -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}

# khorovod.torch for the machine's Python: the extension includes no torch
# header, so it is compiled there over the packed libkhorovod.
python_checks() {
  local pyk ext
  pyk=$(mktemp -d)
  mkdir -p "$pyk/khorovod" && cp -r "$root/python/khorovod/." "$pyk/khorovod/"
  # NCCL_BUILT is NCCL's version code where CMake reads it; 1 = built, version not read.
  printf 'NCCL_BUILT = 1\nCUDA_BUILT = True\n' > "$pyk/khorovod/_build_info.py"
  ext=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
  T=300 check build-extension g++ -O2 -shared -fPIC -std=c++20 $(python3 -m pybind11 --includes) \
    -I"$root/runtime/include" -I"$root/runtime/src" -I"$root/runtime/metrics/include" "$root"/python/src/*.cc \
    -L"$dir/lib" -lkhorovod -Wl,-rpath,"$dir/lib" -o "$pyk/khorovod/_khorovod$ext"
  KHOROVODRUN=$dir/bin/khorovodrun KHOROVOD_TEST_PYTHON=$(command -v python3) PYTHONPATH=$pyk \
    T=400 check pytest-cuda python3 -m pytest -v -p no:cacheprovider "$root/tests/python/test_collectives.py" -k cuda
}

run_checks() {
  dir=$(cd "$dir" && pwd)
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  local nccl
  nccl=$(python3 -c 'import glob, sys
for p in sys.path:
    g = glob.glob(p + "/nvidia/nccl/lib/libnccl.so.2")
    if g: print(g[0].rsplit("/", 1)[0]); break' 2>/dev/null)
  export LD_LIBRARY_PATH=$dir/lib${nccl:+:$nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  local t
  for t in GpuBuild.DeviceBackendsAreRegistered GpuBuild.CreationFailsCleanly; do
    check "$t" "$dir/bin/backend_unit_test" --gtest_filter="$t"
  done
  for t in $("$dir/bin/nccl_gpu_test" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
    [ "$t" = NcclGpu.AbortAndReinitDoesNotLeak ] && [ -z "${LEAK:-}" ] && continue
    check "$t" "$dir/bin/nccl_gpu_test" --gtest_filter="$t" --gtest_repeat="${REPEAT:-1}"
  done
  for t in $("$dir/bin/runtime_gpu_test" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
    check "$t" "$dir/bin/runtime_gpu_test" --gtest_filter="$t" --gtest_repeat="${REPEAT:-1}"
  done
  python_checks
  T=200 check gpu-fusion-bench "$dir/bin/khorovod-bench-gpu-fusion" --reps 11 --iters 20
  echo "gpu-check: $pass passed, $fail failed"
  [ $fail -eq 0 ]
}

case $verb in
  pack) pack ;;
  run) run_checks ;;
  *) echo "gpu-check: unknown verb '$verb' (pack or run)" >&2; exit 2 ;;
esac
