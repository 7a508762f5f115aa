#!/usr/bin/env bash
# Configures and builds khorovod into build/<name> with ccache kept outside
# the clone (~/.cache/khorovod/ccache), so rebuilds on the same machine are
# cheap. Usage: scripts/build.sh <name> [extra cmake args...] [-- targets...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=$1; shift
cmake_args=(); targets=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; targets=("$@"); break; fi
  cmake_args+=("$1"); shift
done

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/khorovod/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
# Paths relative to the clone, so every clone of the repository (CI's fresh
# one included) hits the same cache entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
mkdir -p "$CCACHE_DIR"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

cmake -S "$root" -B "$root/build/$name" -G Ninja "${launcher[@]}" "${cmake_args[@]}" >/dev/null
jobs=$(nproc)
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build "$root/build/$name" -j "$jobs" --target "${targets[@]}"
else
  cmake --build "$root/build/$name" -j "$jobs"
fi
