#!/usr/bin/env bash
# The ecosystem stage of scripts/test.sh: the operator beside the cluster
# tools its users run, built at pinned versions in the one module graph of
# scripts/k8s-tools.sh (cached in ~/.cache/khorovod/k8s):
#   gang_test.sh   scheduler-plugins' coscheduling as a second scheduler;
#   kueue_test.sh  Kueue's controller manager admitting HorovodJobs.
# Ends with "ecosystem: N passed, M failed" (the sum of the tests' own lines;
# a test that ends without its line counts as one failure).
# Usage: tests/ecosystem/run.sh OPERATOR_BINARY
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
op_bin=${1:?usage: run.sh OPERATOR_BINARY}
passed=0; failed=0
for b in coscheduler kueue; do
  start=$SECONDS
  bash "$root/scripts/k8s-tools.sh" "$b" >/dev/null || { echo "ecosystem: building $b failed"; failed=$((failed + 1)); }
  echo "ecosystem: $b ready after $((SECONDS - start)) s"
done
for t in gang kueue; do
  start=$SECONDS
  out=$(timeout 900 bash "$root/tests/ecosystem/${t}_test.sh" "$op_bin" 2>&1); echo "$out"
  summary=$(grep -E "^$t: [0-9]+ passed, [0-9]+ failed" <<<"$out" | tail -1)
  if [ -z "$summary" ]; then failed=$((failed + 1)); echo "ecosystem: $t ended without its summary"; continue; fi
  passed=$((passed + $(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$summary")))
  failed=$((failed + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$summary")))
  echo "ecosystem: $t took $((SECONDS - start)) s"
done
echo "ecosystem: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
