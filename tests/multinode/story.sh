#!/usr/bin/env bash
# The multi-node scenarios on the cluster of scripts/real-cluster.sh (up,
# with the images loaded; tests/multinode/run.sh does both), asserted from the
# API objects and the workers' own output:
#   0. 3 nodes Ready, each its own containerd; no namespace routes off the machine;
#   1. helm install of the operator (on khvc-n1, with CoreDNS);
#   2. spread: 3 pods x 2 slots on 3 nodes, local/cross ranks from the nodes;
#   3. a node crashed; 4. a node's network cut (scenarios.sh);
#   5. drain, preemption, scale down (a drain the PDB refuses) and up;
#   6. GPUs (issue 31): Pack and Spread, GPU workers only on GPU nodes, an
#      Unhealthy device's node avoided (gpu.sh).
# MULTINODE_SCENARIOS picks some (e.g. "spread node_kill"); default all.
# Prints each scenario's time and "multinode: N passed, M failed".
# Usage: story.sh WORK_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tests/multinode"
work=${1:?usage: story.sh WORK_DIR}
mkdir -p "$work"
cluster_script="$root/scripts/real-cluster.sh"
source "$root/tests/realnode/lib.sh"
source "$root/tests/realnode/scenarios.sh"
source "$here/lib.sh"
source "$here/scenarios.sh"
source "$here/gpu.sh"

check_cluster() {
  local nodes; nodes=$(k get nodes -o wide)
  echo "$nodes"
  local ready; ready=$(k get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)
  [ "$ready" -eq "$MN_NODES" ] && ok "$MN_NODES nodes Ready" || fail "$ready of $MN_NODES nodes Ready"
  [ "$(grep -c 'containerd://' <<<"$nodes")" -eq "$MN_NODES" ] && ok "every node runs its own containerd" || fail "not every node reports containerd"
  local i routes bad=""
  for ((i = 1; i <= MN_NODES; i++)); do
    routes=$(real_node node-exec "$i" ip route show table all 2>&1)
    grep -q '^default' <<<"$routes" && bad+=" khvc-n$i"
  done
  grep -q '^default' <<<"$(in_node ip route show table all)" && bad+=" control-plane"
  [ -z "$bad" ] && ok "no namespace of the cluster has a default route" || fail "default routes in:$bad"
}

run_scenario() {  # name
  local t=$SECONDS
  echo "== $1"
  "scenario_$1"
  echo "-- $1 took $((SECONDS - t))s"
}

check_cluster
install_operator_mn || { echo "multinode: $passed passed, $((failed + 1)) failed"; exit 1; }
for s in ${MULTINODE_SCENARIOS:-spread node_kill net_cut evictions gpu_placement gpu_avoid}; do
  declare -F "scenario_$s" >/dev/null || { fail "no scenario '$s'"; continue; }
  run_scenario "$s"
done
echo "multinode: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
