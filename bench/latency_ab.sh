#!/usr/bin/env bash
# Alternates the tiny-tensor latency benchmark between two builds (e.g. the
# previous commit's and this one's) and prints the median of each figure, so
# two versions are compared within the same minutes on a noisy machine.
#   bench/latency_ab.sh OLD_BIN_DIR NEW_BIN_DIR [RANKS] [RUNS]
# Each *_BIN_DIR holds khorovodrun and khorovod-bench-allreduce (a Release
# build's build/bench/bin, see docs/benchmarks.md).
set -euo pipefail
old=${1:?old bin dir}; new=${2:?new bin dir}; ranks=${3:-4}; runs=${4:-10}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 0; i < runs; i++)); do
  for label in old new; do
    dir=$old; [ "$label" = new ] && dir=$new
    line=$("$dir/khorovodrun" -np "$ranks" "$dir/khorovod-bench-allreduce" --mode latency --reps 7 2>&1 |
           grep -o 'RESULT.*' || true)
    [ -n "$line" ] || { echo "latency_ab: $label run $i printed no RESULT" >&2; exit 1; }
    echo "$label ${line#RESULT }" >>"$out"
  done
done
python3 - "$out" "$ranks" "$runs" <<'PY'
import statistics, sys
path, ranks, runs = sys.argv[1], sys.argv[2], sys.argv[3]
rows = {}
for line in open(path):
    label, *pairs = line.split()
    for key, value in (p.split("=") for p in pairs):
        rows.setdefault(label, {}).setdefault(key, []).append(float(value))
print(f"# {ranks} ranks, {runs} alternating runs each; median (min..max) in us")
for label in ("old", "new"):
    r = rows[label]
    cells = [f"{k}={statistics.median(r[k]):.1f} ({min(r[k]):.1f}..{max(r[k]):.1f})"
             for k in ("ours_us", "gloo_us", "latency_overhead_us")]
    print(label, " ".join(cells))
PY
