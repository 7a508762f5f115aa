#!/usr/bin/env bash
# khorovod.torch against Horovod 0.28.1 and torch DDP (gloo) on the same
# torch (Debian's python3-torch), in alternating blocks of one run; prints
# Markdown tables of medians and same-run ratios (docs/benchmarks.md).
#   bench/side_by_side.sh [steps|sweep|all|probe] [extra side_by_side.py args]
#     steps  the three training steps and allreduce at 4 B, 64 KiB, 4 MiB, 64 MiB
#     sweep  allreduce from Python, 4 B to 256 MiB in steps of 4x
#     probe  the per-call cost of one allreduce_ from Python at 4 B, 64 KiB
#            and 4 MiB: khorovod, the baseline build (if BASELINE is set)
#            and DDP only, so it needs no Horovod build
# BASELINE=<checkout> adds a "baseline" column: khorovod from that checkout
# (e.g. `git worktree add --detach ../base <commit>`), built the same way in
# <checkout>/build/sxs, in the same rotation.
# Builds what it needs: khorovod's Release build in build/sxs (ccache) and
# Horovod's wheel and venv (scripts/horovod-wheel.sh, cached in ~/.cache).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}; shift || true
cd "$root"
build_sxs() {
  nice -n 5 "$1/scripts/build.sh" sxs -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
    -DKHOROVOD_WITH_NCCL=OFF -- khorovod_python khorovodrun >/dev/null
}
build_sxs "$root"
common=(--khorovodrun build/sxs/bin/khorovodrun --khorovod-pythonpath build/sxs/python)
frameworks=khorovod
if [ -n "${BASELINE:-}" ]; then
  base=$(cd "$BASELINE" && pwd)
  build_sxs "$base"
  common+=(--baseline-khorovodrun "$base/build/sxs/bin/khorovodrun"
           --baseline-pythonpath "$base/build/sxs/python")
  frameworks+=,baseline
fi
if [ "$what" != probe ]; then
  hvd_python=$(scripts/horovod-wheel.sh | tail -1)
  common+=(--horovod-python "$hvd_python")
  frameworks+=,horovod
fi
common+=(--frameworks "$frameworks,ddp")
sweep=$(python3 -c 'print(",".join(str(4 << (2 * i)) for i in range(14)))')  # 4 B .. 256 MiB
case $what in
  steps) python3 bench/python/side_by_side.py "${common[@]}" "$@" ;;
  sweep) python3 bench/python/side_by_side.py "${common[@]}" --steps "" --sizes "$sweep" "$@" ;;
  probe) python3 bench/python/side_by_side.py "${common[@]}" --steps "" --sizes 4,65536,4194304 "$@" ;;
  all)   python3 bench/python/side_by_side.py "${common[@]}" "$@"
         python3 bench/python/side_by_side.py "${common[@]}" --steps "" --sizes "$sweep" "$@" ;;
  *) echo "side_by_side: unknown mode $what (steps, sweep, all or probe)" >&2; exit 2 ;;
esac
