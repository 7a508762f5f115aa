#!/usr/bin/env bash
# Gang scheduling end to end: schedulingPolicy.gang against the real
# coscheduling plugin (scheduler-plugins' scheduler, built from its Go module
# by scripts/k8s-tools.sh) running as a second scheduler beside kube-scheduler,
# on the test control plane (tests/operator/cluster/cluster.sh) with kwok
# nodes. Each worker asks for one CPU and each worker node has room for one.
#   1. a job with minReplicas 3 (PodGroup minMember 3), maxReplicas 4,
#      replicas 4, and two worker nodes: for longer than the plugin's permit
#      wait, no worker pod is bound (no half gang holds nodes);
#   2. a third node appears: three workers bind together (the gang is whole
#      at minMember although the fourth pod still has no room);
#   3. a fourth node appears: the fourth worker, beyond minMember, binds too
#      (the PodGroup does not hold elastic scale-up back);
#   4. kubectl scale to 3 and back to 4 with the room taken: the new worker
#      binds once a node frees up (no deadlock on an already-running gang).
# Ends with "gang: N passed, M failed".
# Usage: tests/ecosystem/gang_test.sh OPERATOR_BINARY
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
op_bin=${1:?usage: gang_test.sh OPERATOR_BINARY}
source "$root/tests/ecosystem/lib.sh"
eco_start_cluster gang
eco_tools coscheduler
manifests="$K8S_BIN/manifests/coscheduler"

k apply -f "$manifests/scheduling.x-k8s.io_podgroups.yaml" >/dev/null
wait_until 120 crds_established podgroups.scheduling.x-k8s.io || { echo "FAIL: the PodGroup CRD is not established"; exit 1; }
# The second scheduler runs as system:kube-scheduler, which may also read and
# update PodGroups (what scheduler-plugins' own install grants it).
k apply -f - >/dev/null <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: coscheduling-podgroups}
rules:
- apiGroups: [scheduling.x-k8s.io]
  resources: [podgroups, podgroups/status, elasticquotas, elasticquotas/status]
  verbs: [get, list, watch, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: coscheduling-podgroups}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: coscheduling-podgroups}
subjects: [{kind: User, name: system:kube-scheduler}]
YAML
permit_wait=5
cat > "$dir/coscheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
clientConnection: {kubeconfig: "$dir/cluster/scheduler.kubeconfig"}
profiles:
- schedulerName: scheduler-plugins-scheduler
  plugins:
    multiPoint: {enabled: [{name: Coscheduling}]}
    queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: $permit_wait}
YAML
# Coscheduling (v0.33.5) re-queues the pods it rejected only on Pod and
# PodGroup events, not on a new node: new room is seen at the scheduler's
# periodic flush of unschedulable pods, 5 min by default. 20 s here
# (docs/kueue.md, "Gang scheduling").
flush=20
"$K8S_BIN/coscheduler" --config "$dir/coscheduler.yaml" --bind-address 127.0.0.1 --secure-port 0 \
  --pod-max-in-unschedulable-pods-duration=${flush}s \
  --authentication-kubeconfig "$dir/cluster/scheduler.kubeconfig" \
  --authorization-kubeconfig "$dir/cluster/scheduler.kubeconfig" --v=3 > "$dir/coscheduler.log" 2>&1 &
eco_track $! coscheduler

eco_start_kwok
eco_add_nodes worker 1 2 "1500m"
eco_start_operator "$op_bin" --gang-scheduling=true
k create namespace gang >/dev/null
wait_until 30 k get serviceaccount default -n gang

k apply -f - >/dev/null <<'YAML'
apiVersion: khorovod.dev/v1alpha1
kind: HorovodJob
metadata: {name: gangjob, namespace: gang}
spec:
  replicas: 4
  minReplicas: 3
  maxReplicas: 4
  schedulingPolicy: {gang: true, schedulerName: scheduler-plugins-scheduler}
  worker:
    template:
      spec:
        nodeSelector: {pool: worker}
        containers:
        - name: trainer
          image: khorovod/runtime:sim
          command: [khorovod-example-trainer]
          resources: {requests: {cpu: "1"}}
YAML
workers() { k get pods -n gang -l khorovod.dev/role=worker --no-headers 2>/dev/null | wc -l; }
bound() { k get pods -n gang -l khorovod.dev/role=worker -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true; }
running() { k get pods -n gang -l khorovod.dev/role=worker --field-selector status.phase=Running --no-headers 2>/dev/null | wc -l; }

# 1. Room for two of the three the gang needs: nothing binds.
check "the operator creates the PodGroup with minMember 3 and four labelled workers" \
  wait_until 60 eval '[ "$(k get podgroup gangjob -n gang -o jsonpath={.spec.minMember} 2>/dev/null)" = 3 ] &&
    [ "$(k get pods -n gang -l scheduling.x-k8s.io/pod-group=gangjob --no-headers 2>/dev/null | wc -l)" -eq 4 ]'
never_bound() {  # seconds: no worker gets a node for that long
  local deadline=$((SECONDS + $1))
  while [ $SECONDS -lt $deadline ]; do [ "$(bound)" -eq 0 ] || return 1; sleep 0.5; done
}
check "with room for 2 of minMember 3, no worker binds for 3 permit waits ($((3 * permit_wait)) s)" \
  never_bound $((3 * permit_wait))
check "the coscheduler held workers at Permit (its log says so), so the wait is the gang's" \
  grep -qE '"Pod is waiting to be scheduled to node".*pod="gang/gangjob-worker' "$dir/coscheduler.log"

# 2. A third node: three bind together; the fourth has no room.
eco_add_nodes worker 3 3 "1500m"
check "a third node: three workers bind and run" wait_until $((3 * flush + 60)) eval '[ "$(running)" -eq 3 ]'
scheduled_span() {  # seconds between the first and last PodScheduled=True of the bound workers
  k get pods -n gang -l khorovod.dev/role=worker -o json | python3 -c '
import datetime, json, sys
ts = [datetime.datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00"))
      for p in json.load(sys.stdin)["items"] for c in p["status"].get("conditions", [])
      if c["type"] == "PodScheduled" and c["status"] == "True"]
print(int((max(ts) - min(ts)).total_seconds()) if len(ts) == 3 else 999)'
}
check "the three bound together (PodScheduled within 1 s of each other)" eval '[ "$(scheduled_span)" -le 1 ]'
check "the fourth worker stays Pending without a node" eval '[ "$(bound)" -eq 3 ]'

# 3. A fourth node: the worker beyond minMember binds.
eco_add_nodes worker 4 4 "1500m"
check "a fourth node: the worker beyond minMember binds and runs" wait_until $((3 * flush + 60)) eval '[ "$(running)" -eq 4 ]'
check "the job reports 4 ready workers" \
  wait_until 60 eval '[ "$(k get hvdjob gangjob -n gang -o jsonpath={.status.readyReplicas})" = 4 ]'

# 4. Scale down to 3, take the freed node, scale back to 4, free the node.
k scale hvdjob gangjob -n gang --replicas 3 >/dev/null
check "scaled to 3: three workers remain" wait_until 60 eval '[ "$(workers)" -eq 3 ]'
k create -n gang -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: squatter}
spec:
  nodeSelector: {pool: worker}
  containers: [{name: c, image: sim, resources: {requests: {cpu: "1"}}}]
YAML
check "another pod takes the freed node" \
  wait_until 60 eval '[ "$(k get pod squatter -n gang -o jsonpath={.status.phase})" = Running ]'
k scale hvdjob gangjob -n gang --replicas 4 >/dev/null
check "scaled back to 4: the new worker waits without a node" \
  eval 'wait_until 30 eval "[ \$(workers) -eq 4 ]" && sleep $((2 * permit_wait)) && [ "$(bound)" -eq 3 ]'
k delete pod squatter -n gang --wait=false >/dev/null
check "the node frees up: the new worker binds and runs" wait_until $((3 * flush + 60)) eval '[ "$(running)" -eq 4 ]'

# Control: the same scheduler without a PodGroup binds half a job, which is
# what the gang prevents (so the checks above can fail).
eco_add_nodes worker 5 5 "1500m"
k apply -f - >/dev/null <<'YAML'
apiVersion: khorovod.dev/v1alpha1
kind: HorovodJob
metadata: {name: nogang, namespace: gang}
spec:
  replicas: 2
  schedulingPolicy: {schedulerName: scheduler-plugins-scheduler}
  worker:
    template:
      spec:
        nodeSelector: {pool: worker}
        containers:
        - name: trainer
          image: khorovod/runtime:sim
          command: [khorovod-example-trainer]
          resources: {requests: {cpu: "1"}}
YAML
check "control: without gang, one of two workers binds where only one fits" wait_until 60 eval \
  '[ "$(k get pods -n gang -l khorovod.dev/job-name=nogang,khorovod.dev/role=worker -o jsonpath="{range .items[*]}{.spec.nodeName}{\"\\n\"}{end}" | grep -c .)" -eq 1 ]'

eco_finish gang
