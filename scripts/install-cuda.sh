#!/usr/bin/env bash
# Installs the CUDA runtime (headers + libcudart) that the GPU backends
# compile and link against, and NCCL's header (the NCCL backend compiles
# against it but loads libnccl at run time with dlopen, whichever NCCL >= 2.27
# the machine has: backend/nccl/nccl_library.h), from NVIDIA's wheels on the
# Python package index, into a cache outside the clone keyed by version:
#   ~/.cache/khorovod/cuda-<cudart>-nccl-<nccl>/{include,lib}
# No driver, no GPU and no nvcc are needed: only the crt/ headers are taken
# from the nvcc wheel, because cuda_runtime_api.h includes them.
# Idempotent: a complete prefix is reused; wheels are cached too.
# Prints the prefix on its last line (pass it as -DKHOROVOD_CUDA_ROOT=...).
# Usage: scripts/install-cuda.sh [--print-prefix]
set -euo pipefail

CUDART_VERSION=${KHOROVOD_CUDART_VERSION:-12.4.127}
NVCC_VERSION=${KHOROVOD_NVCC_VERSION:-12.4.131}
NCCL_VERSION=${KHOROVOD_NCCL_VERSION:-2.32.3}

cache=${KHOROVOD_CACHE:-$HOME/.cache/khorovod}
prefix="$cache/cuda-$CUDART_VERSION-nccl-$NCCL_VERSION"
wheels="$cache/wheels"

if [ "${1:-}" = "--print-prefix" ]; then echo "$prefix"; exit 0; fi
if [ -f "$prefix/.complete" ]; then
  echo "install-cuda: present"
  echo "$prefix"
  exit 0
fi

python=$(command -v python3 || true)
[ -n "$python" ] || { echo "install-cuda: python3 is needed to fetch the wheels" >&2; exit 1; }
mkdir -p "$wheels"
specs=("nvidia-cuda-runtime-cu12==$CUDART_VERSION" "nvidia-cuda-nvcc-cu12==$NVCC_VERSION"
       "nvidia-nccl-cu12==$NCCL_VERSION")
echo "install-cuda: fetching ${specs[*]}"
# --platform/--python-version select the manylinux x86_64 wheels whatever the
# local interpreter is (NCCL >= 2.32 is tagged manylinux_2_27, the CUDA
# 12.4 wheels manylinux2014); --no-deps keeps pip from pulling anything else.
"$python" -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --python-version 3.11 -d "$wheels" "${specs[@]}"

stage=$(mktemp -d "$cache/.cuda-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/include" "$stage/lib"
# extract WHEEL_GLOB MEMBER_PREFIX DEST: copies the wheel's files under
# MEMBER_PREFIX into DEST (a wheel is a zip; python's zipfile avoids needing unzip).
extract() {
  "$python" - "$1" "$2" "$3" <<'EOF'
import glob, os, shutil, sys, zipfile
pattern, member_prefix, dest = sys.argv[1:4]
paths = glob.glob(pattern)
if len(paths) != 1:
    sys.exit(f"install-cuda: expected one wheel matching {pattern}, found {paths}")
with zipfile.ZipFile(paths[0]) as z:
    n = 0
    for info in z.infolist():
        if info.is_dir() or not info.filename.startswith(member_prefix):
            continue
        rel = info.filename[len(member_prefix):]
        if rel.endswith("__init__.py"):
            continue
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
        n += 1
    if n == 0:
        sys.exit(f"install-cuda: nothing under {member_prefix} in {paths[0]}")
EOF
}
extract "$wheels/nvidia_cuda_runtime_cu12-$CUDART_VERSION-*.whl" nvidia/cuda_runtime/include/ "$stage/include"
extract "$wheels/nvidia_cuda_runtime_cu12-$CUDART_VERSION-*.whl" nvidia/cuda_runtime/lib/ "$stage/lib"
extract "$wheels/nvidia_cuda_nvcc_cu12-$NVCC_VERSION-*.whl" nvidia/cuda_nvcc/include/crt/ "$stage/include/crt"
# Only NCCL's headers: libnccl (hundreds of MB of kernels) is never linked.
extract "$wheels/nvidia_nccl_cu12-$NCCL_VERSION-*.whl" nvidia/nccl/include/ "$stage/include"
# The wheels ship only the sonames; the linker looks for the plain names.
ln -sf libcudart.so.12 "$stage/lib/libcudart.so"
for f in include/cuda_runtime_api.h include/crt/host_defines.h include/nccl.h lib/libcudart.so.12; do
  [ -e "$stage/$f" ] || { echo "install-cuda: $f missing after extraction" >&2; exit 1; }
done
touch "$stage/.complete"
rm -rf "$prefix"
mv "$stage" "$prefix"
trap - EXIT
echo "install-cuda: installed into $prefix"
echo "$prefix"
