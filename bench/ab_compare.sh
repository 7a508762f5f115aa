#!/usr/bin/env bash
# Same-run A/B of two builds over the tensor path and recovery: the
# allreduce bandwidth at a few sizes, the tiny-tensor latency and the elastic
# recovery/join time. Each block runs every measure once per build, the two
# builds back to back (OLD first in odd blocks, NEW first in even ones, so a
# drift in load favours neither); the summary gives, per figure, the median
# over blocks of each block's NEW/OLD ratio with its min..max.
#   bench/ab_compare.sh OLD_BIN_DIR NEW_BIN_DIR [BLOCKS] [RAW_FILE]
# Each *_BIN_DIR holds khorovodrun, khorovod-bench-allreduce and
# khorovod-bench-elastic (a Release build's build/bench/bin, see
# docs/benchmarks.md). Environment:
#   AB_LOCK       a file to flock around each block (a shared machine's
#                 benchmark lock), released between blocks
#   AB_SIZES      sweep sizes in bytes (default "4096 1048576 16777216")
#   AB_RANKS      rank counts for the sweep and latency (default "2 4")
#   AB_TRIALS     recovery trials per block (default 5; 0 leaves recovery out)
# RAW_FILE (default: a temporary file) keeps one line per figure and run.
set -euo pipefail
old=${1:?old bin dir}; new=${2:?new bin dir}; blocks=${3:-4}
raw=${4:-}
sizes=${AB_SIZES:-4096 1048576 16777216}
ranks_list=${AB_RANKS:-2 4}
trials=${AB_TRIALS:-5}
if [ -z "$raw" ]; then
  raw=$(mktemp)
  trap 'rm -f "$raw"' EXIT
fi

# Appends "block label measure key=value..." for one allreduce bench run:
# the sweep's row (ours_us, gloo_us: 0.1 us resolution, where its busbw
# keeps 3 decimals) or the latency's RESULT line.
run_allreduce() {
  local block=$1 label=$2 dir=$3 measure=$4 np=$5; shift 5
  local out line
  out=$(timeout 300 "$dir/khorovodrun" -np "$np" "$dir/khorovod-bench-allreduce" "$@" 2>&1 || true)
  if [ "$1 $2" = "--mode sweep" ]; then
    line=$(awk -F'|' 'NF == 5 && $1 ~ /[0-9] *$/ {
      split($2, o, " "); split($3, g, " "); print "ours_us=" o[1] " gloo_us=" g[1]; exit }' <<<"$out")
  else
    line=$(grep -o 'RESULT.*' <<<"$out" | sed 's/^RESULT latency_overhead_us=[^ ]* //')
  fi
  [ -n "$line" ] || {
    echo "ab_compare: $label $measure printed no figure:" >&2; tail -5 <<<"$out" >&2; return 1; }
  echo "$block $label $measure $line" >>"$raw"
}

# Appends the recovery and join medians of one elastic bench run.
run_recovery() {
  local block=$1 label=$2 dir=$3 out
  out=$(timeout 600 "$dir/khorovod-bench-elastic" --khorovodrun "$dir/khorovodrun" \
        --trials "$trials" 2>&1 || true)
  local rec join
  rec=$(awk '/^recovery \(kill/ {print $(NF-3)}' <<<"$out")
  join=$(awk '/^join \(start/ {print $(NF-3)}' <<<"$out")
  [ -n "$rec" ] && [ -n "$join" ] || {
    echo "ab_compare: $label recovery printed no medians:" >&2; tail -5 <<<"$out" >&2; return 1; }
  echo "$block $label recovery_np4 recovery_ms=$rec join_ms=$join" >>"$raw"
}

run_build() {
  local block=$1 label=$2 dir=$3 np bytes
  for np in $ranks_list; do
    for bytes in $sizes; do
      run_allreduce "$block" "$label" "$dir" "sweep_${bytes}B_np$np" "$np" \
        --mode sweep --min-bytes "$bytes" --max-bytes "$bytes" --reps 3
    done
    run_allreduce "$block" "$label" "$dir" "latency_np$np" "$np" --mode latency --reps 7
  done
  ((trials == 0)) || run_recovery "$block" "$label" "$dir"
}

run_block() {
  local block=$1
  if ((block % 2)); then
    run_build "$block" old "$old"; run_build "$block" new "$new"
  else
    run_build "$block" new "$new"; run_build "$block" old "$old"
  fi
}

for ((b = 1; b <= blocks; b++)); do
  echo "# block $b of $blocks, $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  if [ -n "${AB_LOCK:-}" ]; then
    exec 9>>"$AB_LOCK"; flock 9; run_block "$b"; flock -u 9
  else
    run_block "$b"
  fi
done

python3 - "$raw" "$blocks" <<'PY'
import statistics, sys
path, blocks = sys.argv[1], sys.argv[2]
fig = {}  # (measure, key) -> {block: {label: value}}
for line in open(path):
    block, label, measure, *pairs = line.split()
    for key, value in (p.split("=") for p in pairs):
        fig.setdefault((measure, key), {}).setdefault(block, {})[label] = float(value)
print(f"# {blocks} blocks; NEW/OLD per block: median (min..max); above 1: NEW is slower")
for (measure, key), by_block in fig.items():
    pairs = [(v["old"], v["new"]) for v in by_block.values() if "old" in v and "new" in v]
    ratios = [n / o for o, n in pairs]
    olds, news = [o for o, _ in pairs], [n for _, n in pairs]
    print(f"{measure:22s} {key:20s} old {statistics.median(olds):10.3f} "
          f"new {statistics.median(news):10.3f}  NEW/OLD {statistics.median(ratios):.3f} "
          f"({min(ratios):.3f}..{max(ratios):.3f})")
PY
