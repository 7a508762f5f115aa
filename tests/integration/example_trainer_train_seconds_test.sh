#!/usr/bin/env bash
# The trainer's --train-seconds (the multi-node stage's jobs train for a time,
# not a step count sized to one machine's speed): 3 ranks with a step count
# they could never reach stop together, at a progress line, once they have
# trained 3 s, and agree on the parameters.
set -euo pipefail
khorovodrun=$1 trainer=$2
start=$SECONDS
out=$(timeout 120 "$khorovodrun" -np 3 "$trainer" --steps 1000000000 --log-every 10 --train-seconds 3 2>&1)
took=$((SECONDS - start))
echo "$out"
step=$(sed -nE 's/.*stopping after step ([0-9]+): trained 3 s \(--train-seconds\)/\1/p' <<<"$out")
[ -n "$step" ] || { echo "FAIL: no 'stopping after step N: trained 3 s' line"; exit 1; }
[ $((step % 10)) -eq 0 ] || { echo "FAIL: stopped at step $step, not at a progress line"; exit 1; }
grep -q "<stdout>:step *$step/1000000000" <<<"$out" || { echo "FAIL: no progress line for the last step $step"; exit 1; }
grep -q 'all 3 ranks agree on the parameters' <<<"$out" || { echo "FAIL: ranks disagree"; exit 1; }
[ "$took" -lt 60 ] || { echo "FAIL: a 3 s run took ${took}s"; exit 1; }
echo "PASS: 3 ranks stopped together after step $step (3 s of training, ${took}s in all) and agree"
