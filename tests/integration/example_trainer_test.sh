#!/usr/bin/env bash
# The README's main job, shortened: an elastic run of 4 trainer processes in
# which rank 1 crashes after committing step 40. The run must exit 0, show
# the ring re-forming and resuming from step 40, end with every rank agreeing
# on the parameters, and lower the loss.
set -euo pipefail
khorovodrun=$1 trainer=$2
out=$(timeout 120 "$khorovodrun" -np 4 --min-np 2 --max-np 4 "$trainer" --steps 80 --log-every 20 \
      --fail-at-step 40 2>&1)
echo "$out"
grep -q '<stdout>:step   80/80' <<<"$out" || { echo "FAIL: no progress line for step 80"; exit 1; }
grep -q 'simulating a crash after committing step 40' <<<"$out" || { echo "FAIL: no injected crash"; exit 1; }
grep -q 'ring re-formed: world size [234]; resuming from committed step 40' <<<"$out" \
  || { echo "FAIL: the ring did not re-form from step 40"; exit 1; }
grep -qE 'all [234] ranks agree on the parameters' <<<"$out" || { echo "FAIL: ranks disagree"; exit 1; }
ranks=$(sed -nE 's/.*all ([0-9]+) ranks agree.*/\1/p' <<<"$out")
[ "$(grep -c 'parameters checksum' <<<"$out")" -eq "$ranks" ] || { echo "FAIL: expected $ranks checksums"; exit 1; }
read -r final initial < <(sed -nE 's/.*final loss ([0-9.]+) \(initial ([0-9.]+)\).*/\1 \2/p' <<<"$out")
awk -v f="$final" -v i="$initial" 'BEGIN { exit !(f < 0.7 * i) }' \
  || { echo "FAIL: loss did not go down enough ($initial -> $final)"; exit 1; }
echo "PASS: survived a crash at step 40; loss $initial -> $final; $ranks ranks agree"
