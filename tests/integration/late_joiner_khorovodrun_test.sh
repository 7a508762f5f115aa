#!/usr/bin/env bash
# Late joiners at job end, through khorovodrun: rank 1 crashes right after
# committing the last step, so khorovodrun starts a replacement while the
# survivors finish. Whether the replacement makes the last re-formation (and
# finishes with them) or arrives after training ended (and is told the job is
# finishing), khorovodrun's exit status must be the training's: 0, with every
# finishing rank agreeing. Several rounds, since which path a round takes
# depends on timing; each round says which it took.
set -uo pipefail
khorovodrun=$1 trainer=$2
rounds=${ROUNDS:-3}
fail() { echo "FAIL: $*"; exit 1; }
for round in $(seq 1 "$rounds"); do
  out=$(timeout 150 "$khorovodrun" -np 3 --min-np 2 --max-np 3 "$trainer" --steps 30 --log-every 10 \
        --fail-at-step 30 2>&1)
  status=$?
  [ "$status" -eq 0 ] || { echo "$out"; fail "round $round: khorovodrun exited $status"; }
  grep -q 'simulating a crash after committing step 30' <<<"$out" || { echo "$out"; fail "round $round: no crash"; }
  grep -qE 'all [23] ranks agree on the parameters' <<<"$out" || { echo "$out"; fail "round $round: no agreement"; }
  if grep -q 'the job finished before this worker joined' <<<"$out"; then
    path="the replacement arrived after training ended and exited 0"
  elif grep -q 'all 3 ranks agree' <<<"$out"; then
    path="the replacement joined the last generation and finished with the others"
  else
    path="the survivors finished before khorovodrun started the replacement"
  fi
  echo "round $round: exit 0; $path"
done
echo "PASS: $rounds rounds, khorovodrun exited 0 each time"
