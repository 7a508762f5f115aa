#!/usr/bin/env bash
# Tests scripts/test/stages.sh, the suite's stage runner: the counts each way
# of ending a stage adds, the closing table and summary line, the remembered
# stage times and the budget check. Runs in a temporary cache directory.
# Ends with "stages: N passed, M failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export KHOROVOD_CACHE="$tmp/cache"
ok=0; bad=0
expect() {  # description actual expected
  if [ "$2" = "$3" ]; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "FAIL: $1: got '$2', want '$3'"; fi
}
suite_start=$SECONDS; suite_budget_min=85
source "$root/scripts/test/stages.sh"

cat > "$tmp/ctest.log" <<'LOG'
  1/4 Test  #1: a ...   Passed    0.1 sec
  2/4 Test  #2: b ...***Skipped   0.0 sec
  3/4 Test  #3: c ...***Failed    0.2 sec
  4/4 Test  #4: d ...   Passed    0.1 sec
75% tests passed, 1 tests failed out of 4
The following tests did not run:
	  2 - b (Skipped)
The following tests FAILED:
	  3 - c (Failed)
LOG
stage_begin unit warm; stage_end_ctest "$tmp/ctest.log" >/dev/null
expect "ctest passed" "$passed" 2
expect "ctest failed" "$failed" 1
expect "ctest skipped" "$skipped" 1
expect "ctest failure named" "${failed_names[0]}" "unit: c (Failed)"

printf 'FAIL: the pod ran\nscript: 5 passed, 0 failed\n' > "$tmp/script.log"
stage_begin script cold; stage_end_script "$tmp/script.log" >/dev/null
expect "script passed adds" "$passed" 7
expect "script time remembered" "$(cat "$KHOROVOD_CACHE/stage-times/script.cold")" 0

echo "nothing" > "$tmp/empty.log"
stage_begin quiet warm; stage_end_script "$tmp/empty.log" >/dev/null
expect "a missing summary is one failure" "$failed" 2
expect "a missing summary is a broken stage" "${broken[0]}" "quiet: no summary line"
expect "a broken stage's time is not remembered" "$(ls "$KHOROVOD_CACHE/stage-times/" | tr '\n' ' ')" "script.cold unit.warm "

expect "default estimate" "$(STAGE_DEFAULT_SECS[asan]=600; stage_estimate asan cold)" 600
echo 120 > "$KHOROVOD_CACHE/stage-times/asan.cold"
expect "a warm estimate falls back to the cold time" "$(stage_estimate asan warm)" 120
stage_fits asan warm && r=fits || r=over; expect "120 s fits 85 min" "$r" fits
echo 6000 > "$KHOROVOD_CACHE/stage-times/tsan.warm"
stage_fits tsan warm && r=fits || r=over; expect "100 min does not fit 85 min" "$r" over

stage_skip tsan "over budget" >/dev/null
expect "a skipped stage counts one skipped" "$skipped" 2
table=$(stage_table); rc=$?
expect "the table fails a failed suite" "$rc" 1
expect "the summary line" "$(tail -1 <<<"$table")" "suite: 7 passed, 2 failed, 2 skipped"
expect "the table names the left-out stage" "$(grep -c '^suite: LEFT OUT: tsan: over budget$' <<<"$table")" 1
expect "the table has a row per stage" "$(grep -cE '^suite: (unit|script|quiet|tsan) ' <<<"$table")" 4

# A script stage that could not start its tests names why in the summary.
printf 'realnode: BROKEN: the real node did not come up\nrealnode: 0 passed, 1 failed\n' > "$tmp/broken.log"
stage_begin realnode warm; stage_end_script "$tmp/broken.log" >/dev/null
expect "a script's broken line is named" "${failed_names[-1]}" "realnode: realnode: BROKEN: the real node did not come up"
expect "the table shows a failed stage's last lines" \
  "$(stage_table | grep -c '^suite: | realnode: BROKEN: the real node did not come up$')" 1

echo "stages: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
