#!/usr/bin/env bash
# Installing and using khorovod the way a Kubernetes user does, against the
# real API server of the "k8s" ctest fixture (tests/operator/cluster):
#   helm lint; generated copies current; helm template and kustomize output
#   accepted by `kubectl apply --dry-run=server`; helm install; the chart's
#   RBAC is least privilege (kubectl auth can-i) and enough (the operator
#   binary, impersonating the chart's service account, runs a job through
#   create -> Running -> replace -> scale -> Succeeded -> TTL); a table of
#   invalid HorovodJobs rejected with the expected message; every example
#   accepted; kubectl get shows the printer columns.
# Usage: packaging_test.sh CLUSTER_DIR OPERATOR_BINARY
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=${1:?cluster dir}; operator=${2:?operator binary}
set -a; source "$cluster/env"; set +a
bin=$K8S_BIN
work=$(mktemp -d); op_pid=""
cleanup() {
  [ -n "$op_pid" ] && kill "$op_pid" 2>/dev/null && wait "$op_pid" 2>/dev/null
  "$bin/helm" uninstall khorovod -n khorovod-system --kubeconfig "$KUBECONFIG" >/dev/null 2>&1
  k delete namespace pkg-test --wait=false >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
k() { "$bin/kubectl" --kubeconfig "$KUBECONFIG" --request-timeout=30s "$@"; }
helm() { "$bin/helm" --kubeconfig "$KUBECONFIG" "$@"; }
passed=0; failed=0
check() {  # description command...
  local what=$1; shift
  if out=$("$@" 2>&1); then passed=$((passed + 1)); echo "ok: $what"
  else failed=$((failed + 1)); echo "FAIL: $what"; echo "$out" | tail -20 | sed 's/^/    /'; fi
}
wait_for() {  # seconds command...: polls every 0.2 s
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [ $SECONDS -ge $deadline ] && return 1; sleep 0.2; done
}

# --- static checks
check "helm lint --strict" helm lint --strict "$root/charts/khorovod"
check "helm lint with every optional part on" helm lint --strict "$root/charts/khorovod" \
  --set metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true,grafana.dashboard.enabled=true,operator.gangScheduling=true,replicaCount=2
check "helm lint, namespaced RBAC" helm lint --strict "$root/charts/khorovod" --set rbac.namespaced=true,operator.watchNamespace=team
check "generated manifests match the chart and CRD" bash "$root/scripts/gen-manifests.sh" --check

# --- server-side dry runs
render() { helm template khorovod "$root/charts/khorovod" --namespace khorovod-system --kube-version 1.34.4; }
k create namespace khorovod-system --dry-run=client -o yaml | k apply -f - >/dev/null
dry_run_chart() { render | k apply --dry-run=server -f -; }
check "helm template | kubectl apply --dry-run=server" dry_run_chart
dry_run_kustomize() { k kustomize "$root/deploy/kustomize/$1" | k apply --dry-run=server -f -; }
check "kustomize base accepted by the API server" dry_run_kustomize base
check "kustomize ha overlay accepted by the API server" dry_run_kustomize overlays/ha
for f in "$root"/deploy/examples/*.yaml; do
  check "example $(basename "$f") accepted" k apply --dry-run=server -n default -f "$f"
done

# --- invalid manifests: each rejected with its expected message
for f in "$root"/tests/packaging/invalid/*.yaml; do
  expect=$(sed -n 's/^# expect: //p' "$f")
  rejected_with() { local o; o=$(k apply --dry-run=server -n default -f "$1" 2>&1) && { echo "accepted: $o"; return 1; }; grep -qF -- "$2" <<<"$o" || { echo "$o"; return 1; }; }
  check "invalid $(basename "$f" .yaml) rejected: $expect" rejected_with "$f" "$expect"
done

# --- helm install, then least privilege and enough privilege
check "helm install" helm install khorovod "$root/charts/khorovod" -n khorovod-system --wait=false
sa=system:serviceaccount:khorovod-system:khorovod
can() { [ "$(k auth can-i "$@" --as "$sa" 2>/dev/null)" = yes ]; }
cannot() { ! can "$@"; }
check "SA may create pods" can create pods -n pkg-test
check "SA may delete horovodjobs" can delete horovodjobs.khorovod.dev -n pkg-test
check "SA may update horovodjobs/status" can update horovodjobs.khorovod.dev --subresource status -n pkg-test
check "SA may create leases in its namespace" can create leases.coordination.k8s.io -n khorovod-system
check "SA may not touch leases elsewhere" cannot create leases.coordination.k8s.io -n pkg-test
check "SA may not read secrets" cannot get secrets -n pkg-test
check "SA may not list secrets" cannot list secrets -n pkg-test
check "SA may not update horovodjob specs" cannot update horovodjobs.khorovod.dev -n pkg-test
check "SA may not create deployments" cannot create deployments.apps -n pkg-test
check "SA may not delete services" cannot delete services -n pkg-test
check "SA may watch nodes (lost-node detection)" can watch nodes
check "SA may not change nodes" cannot patch nodes
check "SA may not delete nodes" cannot delete nodes
check "SA may create PodDisruptionBudgets" can create poddisruptionbudgets.policy -n pkg-test
check "SA may patch PodDisruptionBudgets" can patch poddisruptionbudgets.policy -n pkg-test
check "SA may not delete PodDisruptionBudgets" cannot delete poddisruptionbudgets.policy -n pkg-test

sed -e "/^- name: admin/,\$ s|^    client-key: \(.*\)|    client-key: \1\n    as: $sa\n    as-groups: [system:serviceaccounts, system:serviceaccounts:khorovod-system, system:authenticated]|" \
  "$KUBECONFIG" > "$work/as-operator.kubeconfig"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$operator" --kubeconfig "$work/as-operator.kubeconfig" --lease-namespace khorovod-system --lease-name khorovod \
  --metrics-bind "127.0.0.1:$port" --retry-period-seconds 1 --renew-deadline-seconds 3 --lease-duration-seconds 4 \
  > "$work/operator.log" 2>&1 &
op_pid=$!
k create namespace pkg-test >/dev/null
wait_for 30 k get serviceaccount default -n pkg-test
k apply -n pkg-test -f "$root/deploy/examples/horovodjob-cpu.yaml" >/dev/null
pods() { k get pods -n pkg-test -l khorovod.dev/job-name=mlp-cpu,khorovod.dev/role=worker --no-headers 2>/dev/null | wc -l; }
four_pods() { [ "$(pods)" -eq 4 ]; }
check "operator as its service account creates the job's pods" wait_for 30 four_pods
# set_phase POD PHASE READY EXIT: what a kubelet would report. A read-modify-
# write of the status: the operator may update the pod in between (a
# Conflict), so it is tried again from a fresh read, a bounded number of times.
set_phase() {
  for _ in 1 2 3 4 5; do set_phase_once "$@" && return 0; sleep 0.5; done
  return 1
}
set_phase_once() {  # pod phase ready exit
  local st
  if [ "$4" -ge 0 ]; then st="{\"terminated\":{\"exitCode\":$4}}"; else st='{"running":{}}'; fi
  k get pod -n pkg-test "$1" -o json | python3 -c "
import json,sys; p=json.load(sys.stdin)
p['status']={'phase':'$2','podIP':'127.0.0.1','conditions':[{'type':'Ready','status':'$3'}],
 'containerStatuses':[{'name':c['name'],'image':c['image'],'imageID':'','ready':'$3'=='True','restartCount':0,'state':json.loads('$st')} for c in p['spec']['containers']]}
print(json.dumps(p))" | k replace --subresource status -f - >/dev/null
}
for i in 0 1 2 3; do set_phase "mlp-cpu-worker-$i" Running True -1; done
phase_is() { [ "$(k get hvdjob mlp-cpu -n pkg-test -o jsonpath='{.status.phase}')" = "$1" ]; }
check "job Running" wait_for 30 phase_is Running
old_uid=$(k get pod -n pkg-test mlp-cpu-worker-2 -o jsonpath='{.metadata.uid}')
set_phase mlp-cpu-worker-2 Failed False 137
replaced() { local u; u=$(k get pod -n pkg-test mlp-cpu-worker-2 -o jsonpath='{.metadata.uid}'); [ -n "$u" ] && [ "$u" != "$old_uid" ]; }
failed_seen() { [ "$(k get pod -n pkg-test mlp-cpu-worker-2 -o jsonpath='{.metadata.uid}{" "}{.status.phase}')" = "$old_uid Failed" ] || replaced; }
wait_for 10 failed_seen || set_phase mlp-cpu-worker-2 Failed False 137   # a lost update is sent again
check "a failed worker is replaced" wait_for 60 replaced
check "kubectl scale hvdjob --replicas 2" k scale hvdjob mlp-cpu -n pkg-test --replicas 2
two_pods() { [ "$(pods)" -eq 2 ]; }
check "scale-down leaves two workers" wait_for 30 two_pods
columns() { local o; o=$(k get hvdjob -n pkg-test -o wide) || return 1; grep -E 'PHASE +READY +DESIRED +MIN +MAX +GPUS +GPUS-WANTED +RESTARTS +GENERATION +AGE' <<<"$o"; }
check "kubectl get hvdjob -o wide shows the printer columns" columns
short_name() { local o; o=$(k get hvdjobs -n pkg-test) || return 1; grep -q mlp-cpu <<<"$o"; }
check "short name hvdjobs" short_name
for i in 0 1; do set_phase "mlp-cpu-worker-$i" Succeeded False 0; done
check "job Succeeded" wait_for 30 phase_is Succeeded
described() { local o; o=$(k describe hvdjob mlp-cpu -n pkg-test) || return 1; grep -q JobSucceeded <<<"$o"; }
check "kubectl describe shows the events" described
# An RBAC refusal reads 'User "system:serviceaccount:..." cannot <verb> resource ...'.
no_forbidden() { ! grep -E 'forbidden: User ".*" cannot' "$work/operator.log"; }
check "the operator was never refused (RBAC is enough)" no_forbidden
leader() { local o; o=$(curl -sf "127.0.0.1:$port/metrics") || return 1; grep -q '^khorovod_operator_is_leader 1' <<<"$o"; }
check "leader election through the chart's lease Role" leader

[ "$failed" -eq 0 ] || { echo "---- operator log (tail)"; tail -30 "$work/operator.log"; }
echo "packaging: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
