#!/usr/bin/env bash
# The README's main job, shortened: khorovodrun starts 4 trainer processes;
# the run must exit 0, show progress from rank 0, end with every rank
# agreeing on the parameters, and lower the loss.
set -euo pipefail
khorovodrun=$1 trainer=$2
out=$(timeout 120 "$khorovodrun" -np 4 "$trainer" --steps 80 --log-every 20 2>&1)
echo "$out"
grep -q '^\[0\]<stdout>:step   80/80' <<<"$out" || { echo "FAIL: no progress line for step 80"; exit 1; }
grep -q 'all 4 ranks agree on the parameters' <<<"$out" || { echo "FAIL: ranks disagree"; exit 1; }
[ "$(grep -c 'parameters checksum' <<<"$out")" -eq 4 ] || { echo "FAIL: expected 4 checksums"; exit 1; }
read -r final initial < <(sed -nE 's/.*final loss ([0-9.]+) \(initial ([0-9.]+)\).*/\1 \2/p' <<<"$out")
awk -v f="$final" -v i="$initial" 'BEGIN { exit !(f < 0.7 * i) }' \
  || { echo "FAIL: loss did not go down enough ($initial -> $final)"; exit 1; }
echo "PASS: loss $initial -> $final, 4 ranks agree"
