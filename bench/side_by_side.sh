#!/usr/bin/env bash
# khorovod.torch against Horovod 0.28.1 and torch DDP (gloo) on the same
# torch (Debian's python3-torch), in alternating blocks of one run; prints
# Markdown tables of medians and same-run ratios (docs/benchmarks.md).
#   bench/side_by_side.sh [steps|sweep|all] [extra side_by_side.py args]
#     steps  the three training steps and allreduce at 4 B, 64 KiB, 4 MiB, 64 MiB
#     sweep  allreduce from Python, 4 B to 256 MiB in steps of 4x
# Builds what it needs: khorovod's Release build in build/sxs (ccache) and
# Horovod's wheel and venv (scripts/horovod-wheel.sh, cached in ~/.cache).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}; shift || true
cd "$root"
nice -n 5 scripts/build.sh sxs -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
  -DKHOROVOD_WITH_NCCL=OFF -- khorovod_python khorovodrun >/dev/null
hvd_python=$(scripts/horovod-wheel.sh | tail -1)
common=(--khorovodrun build/sxs/bin/khorovodrun --khorovod-pythonpath build/sxs/python
        --horovod-python "$hvd_python")
sweep=$(python3 -c 'print(",".join(str(4 << (2 * i)) for i in range(14)))')  # 4 B .. 256 MiB
case $what in
  steps) python3 bench/python/side_by_side.py "${common[@]}" "$@" ;;
  sweep) python3 bench/python/side_by_side.py "${common[@]}" --steps "" --sizes "$sweep" "$@" ;;
  all)   python3 bench/python/side_by_side.py "${common[@]}" "$@"
         python3 bench/python/side_by_side.py "${common[@]}" --steps "" --sizes "$sweep" "$@" ;;
  *) echo "side_by_side: unknown mode $what (steps, sweep or all)" >&2; exit 2 ;;
esac
