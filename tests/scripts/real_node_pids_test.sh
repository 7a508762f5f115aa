#!/usr/bin/env bash
# The pid files of scripts/real-node.sh and scripts/real-cluster.sh
# (scripts/real-node/common.sh): down signals only the very process that up
# started, never one that merely reuses its pid after a reboot or a snapshot.
# Loads the shared functions alone (the scripts' commands touch the machine).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
RUN=$(mktemp -d)
sleeper_pid=
trap 'kill "$sleeper_pid" 2>/dev/null; rm -rf "$RUN"' EXIT
source "$root/scripts/real-node/common.sh"
ok=0 bad=0
expect() { if [ "$2" = "$3" ]; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "FAIL: $1: got '$2', want '$3'"; fi; }

sleep 60 & sleeper_pid=$!
record_pid sleeper "$sleeper_pid"
expect "a recorded process is live" "$(live_pid sleeper)" "$sleeper_pid"

echo "$sleeper_pid 1" > "$RUN/reused.pid"  # same pid, another start time
expect "a reused pid is not live" "$(live_pid reused || echo none)" none
stop_pid reused
kill -0 "$sleeper_pid" 2>/dev/null && r=alive || r=killed
expect "stopping a reused pid signals nobody" "$r" alive
expect "a stale pid file is removed" "$(ls "$RUN")" "sleeper.pid"

echo "$sleeper_pid" > "$RUN/bare.pid"
expect "a bare pid without start time is not trusted" "$(live_pid bare || echo none)" none

stop_pid sleeper
wait "$sleeper_pid" 2>/dev/null
kill -0 "$sleeper_pid" 2>/dev/null && r=alive || r=stopped
expect "stopping the recorded process stops it" "$r" stopped
expect "its pid file is removed" "$(ls "$RUN" | tr '\n' ' ')" "bare.pid "

echo "real-node pids: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
