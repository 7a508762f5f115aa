#!/usr/bin/env bash
# shellcheck disable=SC2154  # root, work, here: set by the script that sources this one
# Helpers of the real-node user story (sourced by tests/realnode/*.sh):
# kubectl inside the node's network, bounded waits, ok/FAIL tallies.
# Expects: root (the repository), work (a scratch directory); cluster_script
# (default scripts/real-node.sh; the multi-node stage sets scripts/real-cluster.sh).
cluster_script=${cluster_script:-$root/scripts/real-node.sh}
real_node() { bash "$cluster_script" "$@"; }
k() { bash "$cluster_script" kubectl --request-timeout=30s "$@"; }
in_node() { bash "$cluster_script" exec "$@"; }
passed=${passed:-0}; failed=${failed:-0}
ok() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
# wait_for SECONDS COMMAND...: polls every second until COMMAND succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [ $SECONDS -ge $deadline ] && return 1; sleep 1; done
}
# expect WHAT SECONDS COMMAND...: a step of a scenario; returns 1 when it failed.
expect() {
  local what=$1 secs=$2; shift 2
  if wait_for "$secs" "$@"; then ok "$what"; else fail "$what (waited ${secs}s)"; return 1; fi
}
jp() { k get "$@" 2>/dev/null; }  # jp KIND NAME -n NS -o jsonpath=...
phase_of() { jp hvdjob "$1" -n "$2" -o jsonpath='{.status.phase}'; }
phase_is() { [ "$(phase_of "$1" "$2")" = "$3" ]; }
# The logs of every worker container of a job, current and previous incarnations
# that still exist (kubectl logs reads them through the kubelet).
# matches GREP_ARGS...: whether stdin has a matching line. It reads all of
# stdin (grep -c), unlike grep -q, whose early exit under pipefail fails the
# pipeline when the writer is still writing (SIGPIPE): a check then missed
# a match in the logs of rank 0 whenever another pod's logs came after it.
matches() { [ "$(grep -c "$@")" -gt 0 ]; }
# It succeeds even when a pod's logs cannot be read (a pod on a lost node):
# under pipefail its status is the status of the checks it feeds.
job_logs() {  # job ns
  local p
  for p in $(k get pods -n "$2" -l "khorovod.dev/job-name=$1" -o name 2>/dev/null); do
    k logs -n "$2" "$p" --all-containers 2>/dev/null
  done
  return 0
}
# Saves what explains a failure: pods, events, job status, logs.
dump_job() {  # job ns
  local out="$work/dump-$1.txt"
  {
    echo "---- job"; k get hvdjob "$1" -n "$2" -o yaml
    echo "---- pods"; k get pods -n "$2" -o wide
    echo "---- events"; k get events -n "$2" --sort-by=.lastTimestamp
    echo "---- logs"; job_logs "$1" "$2" | tail -200
  } > "$out" 2>&1
  # Every pod's whole log, current and previous container, one file each.
  local p
  for p in $(k get pods -n "$2" -o name 2>/dev/null); do
    k logs -n "$2" "$p" --all-containers --timestamps > "$work/log-$1-${p#pod/}.txt" 2>&1
    k logs -n "$2" "$p" --all-containers --timestamps --previous > "$work/log-$1-${p#pod/}.previous.txt" 2>/dev/null ||
      rm -f "$work/log-$1-${p#pod/}.previous.txt"
  done
  echo "  (details: $out and $work/log-$1-*.txt)"; tail -60 "$out" | sed 's/^/  | /'
}
