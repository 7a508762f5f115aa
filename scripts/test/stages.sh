# shellcheck shell=bash disable=SC2154  # suite_start, suite_budget_min: set by scripts/test.sh, which sources this
# The suite's stage runner (sourced by scripts/test.sh, not run).
#
# Contract: every stage is started with stage_begin and ended with exactly one
# of stage_end_ctest, stage_end_script, stage_end_counts, stage_skip or
# stage_broken. Each records one row of the closing table: the stage's wall
# time, whether its caches were cold or warm when it began (the caller says,
# from the stage's own cache probe), and its passed/failed/skipped counts.
# The counts also add up to the closing line "suite: N passed, M failed,
# K skipped". Single-threaded: stages run one after the other.
#
# Each stage's wall time is remembered per cache state in
# $KHOROVOD_CACHE/stage-times/NAME.{cold,warm}, so that the budget check
# (stage_fits) plans with what this machine measured last time, and with the
# cold figures in STAGE_DEFAULT_SECS only before any run.

stage_times_dir=${KHOROVOD_CACHE:-$HOME/.cache/khorovod}/stage-times
mkdir -p "$stage_times_dir"
passed=0; failed=0; skipped=0
rows=(); failed_names=(); broken=(); left_out=(); failed_logs=()
declare -A STAGE_DEFAULT_SECS=()
# The disk a run starts with: images, builds and podman's save archives take
# tens of GB, and a full disk fails stages in ways that name no disk.
_disk_free_gib() { df --output=avail -BG / | tail -1 | tr -dc '0-9'; }
disk_free_at_start=$(_disk_free_gib)

# stage_begin NAME cold|warm
stage_begin() {
  stage_name=$1; stage_cache=$2; stage_t0=$SECONDS
  echo "== $stage_name ($stage_cache caches, at $(( (SECONDS - suite_start) / 60 )) min)"
}

_stage_row() {  # passed failed skipped note
  local secs=$((SECONDS - stage_t0))
  passed=$((passed + $1)); failed=$((failed + $2)); skipped=$((skipped + $3))
  rows+=("$(printf '%-20s %6s  %-5s %6s %6s %6s  %s' "$stage_name" "$(_mmss "$secs")" "$stage_cache" "$1" "$2" "$3" "$4")")
  [ "$4" = "" ] && echo "$secs" > "$stage_times_dir/$stage_name.$stage_cache"
  echo "== $stage_name: $1 passed, $2 failed, $3 skipped in $(_mmss "$secs")"
}
_mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

# stage_end_ctest LOG: tallies ctest's summary in LOG (a GTEST_SKIP, e.g. a
# GPU test without a GPU, counts as skipped, not passed).
stage_end_ctest() {
  local log=$1 summary total fails skips t
  summary=$(grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" "$log" | tail -1)
  if [ -z "$summary" ]; then stage_broken "no ctest summary"; return; fi
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$summary")
  fails=$(sed -E 's/.*tests passed, ([0-9]+) tests? failed.*/\1/' <<<"$summary")
  skips=$(grep -cE '\(Skipped\)$' "$log" || true)
  while read -r t; do failed_names+=("$stage_name: $t"); done < <(
    sed -n '/The following tests FAILED:/,$p' "$log" | grep -E '^[[:space:]]+[0-9]+ - ' |
      sed -E 's/^[[:space:]]+[0-9]+ - //')
  _stage_row $((total - fails - skips)) "$fails" "$skips" ""
}

# stage_end_script LOG: tallies the last "NAME: N passed, M failed" line of LOG
# (NAME is the stage's), naming the failed checks the log shows.
stage_end_script() {
  local log=$1 summary t
  summary=$(grep -E "^$stage_name: [0-9]+ passed, [0-9]+ failed" "$log" | tail -1)
  if [ -z "$summary" ]; then failed_logs+=("$log"); stage_broken "no summary line"; return; fi
  grep -qE "^$stage_name: [0-9]+ passed, 0 failed" <<<"$summary" || failed_logs+=("$log")
  while read -r t; do failed_names+=("$stage_name: $t"); done < <(
    grep -E '^FAIL: | FAILED$| ended without its summary$|: BROKEN: |ended early' "$log" | head -20)
  _stage_row "$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$summary")" \
             "$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$summary")" 0 ""
}

# stage_end_counts PASSED FAILED: a stage that counts for itself.
stage_end_counts() { _stage_row "$1" "$2" 0 ""; }

# stage_broken REASON: the stage could not run its tests; one failure.
stage_broken() {
  broken+=("$stage_name: $1")
  _stage_row 0 1 0 "BROKEN: $1"
}

# stage_skip NAME REASON: a stage left out; named in the summary.
stage_skip() {
  stage_name=$1; stage_cache=-; stage_t0=$SECONDS
  left_out+=("$1: $2")
  echo "suite: SKIPPED STAGE $1: $2"
  _stage_row 0 0 1 "SKIPPED: $2"
}

# stage_estimate NAME cold|warm: seconds this stage took last time on this
# machine, else its default (cold) figure.
stage_estimate() {
  local f="$stage_times_dir/$1.$2"
  if [ -s "$f" ]; then cat "$f"; elif [ "$2" = warm ] && [ -s "$stage_times_dir/$1.cold" ]; then
    cat "$stage_times_dir/$1.cold"
  else echo "${STAGE_DEFAULT_SECS[$1]:-600}"; fi
}

# stage_fits NAME cold|warm: whether the stage, at its estimate, still ends
# within the suite's budget (KHOROVOD_SUITE_BUDGET_MIN, minutes since start).
stage_fits() {
  local est; est=$(stage_estimate "$1" "$2")
  [ $((SECONDS - suite_start + est)) -le $((suite_budget_min * 60)) ]
}

# ccache_counts: "MISSES HITS" so far, for a build stage's cold/warm verdict.
ccache_counts() {
  CCACHE_DIR=${CCACHE_DIR:-${KHOROVOD_CACHE:-$HOME/.cache/khorovod}/ccache} ccache --print-stats 2>/dev/null |
    awk -F'\t' '$1 == "cache_miss" { m = $2 } $1 ~ /^(direct|preprocessed)_cache_hit$/ { h += $2 }
                END { print m + 0, h + 0 }'
}

# _quoted: stdin as the summary's quoted log lines, each cut to 300 characters.
_quoted() { cut -c1-300 | sed 's/^/suite: | /'; }

# stage_table: the closing table and the summary line; returns non-zero on failure.
stage_table() {
  local r b t
  # CI shows only the end of the output: the failed stages' last lines go here.
  # The first failure usually explains the rest, so its own lines come first.
  local first
  for t in "${failed_logs[@]}"; do
    first=$(grep -n -m1 'FAIL: ' "$t" | cut -d: -f1)
    if [ -n "$first" ]; then
      echo "suite: the first failure in $t (line $first) and what follows it:"
      sed -n "${first},$((first + 40))p" "$t" | _quoted
    fi
    echo "suite: the last lines of $t:"; tail -15 "$t" | _quoted
  done
  echo "suite: stage                  time  cache  passed failed skipped"
  for r in "${rows[@]}"; do echo "suite: $r"; done
  echo "suite: total $(_mmss $((SECONDS - suite_start))); disk free: ${disk_free_at_start} GiB at start, $(_disk_free_gib) GiB at end"
  for t in "${left_out[@]}"; do echo "suite: LEFT OUT: $t"; done
  for t in "${failed_names[@]}"; do echo "suite: FAILED: $t"; done
  for b in "${broken[@]}"; do echo "suite: BROKEN STAGE: $b"; done
  echo "suite: $passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
}
