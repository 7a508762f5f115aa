#!/usr/bin/env bash
# A GPU build must still load on machines without the NVIDIA driver: neither
# libkhorovod nor anything it pulls in may need libcuda.so (cudart loads it
# at the first CUDA call instead). Usage: check_no_libcuda.sh LIBRARY
set -euo pipefail
lib=$1
deps=$(ldd "$lib")
echo "$deps"
if grep -q "not found" <<<"$deps"; then echo "FAIL: unresolved dependency of $lib"; exit 1; fi
if grep -qE "libcuda\.so" <<<"$deps"; then echo "FAIL: $lib needs libcuda"; exit 1; fi
grep -qE "libcudart\.so" <<<"$deps" || { echo "FAIL: $lib does not link cudart: not a GPU build"; exit 1; }
echo "OK: $lib loads without libcuda"
