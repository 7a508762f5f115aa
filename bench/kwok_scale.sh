#!/usr/bin/env bash
# Scale simulation: the operator against a real kube-apiserver + etcd +
# scheduler + controller-manager with kwok managing fake nodes (pods on them
# become Running without any process). Measures, for 200 jobs x 50 workers
# (10,000 pods) and then 1 job x 2000 workers, each with a fresh operator
# process at its default --kube-api-qps/--kube-api-burst:
#   - time from submitting to all worker pods Running,
#   - the operator's peak resident memory (VmHWM), CPU seconds, API requests
#     per job, the highest API request rate seen in any 1 s sample (against
#     the client-side limit), time spent throttled, and reconcile p99 (upper
#     bound of the histogram bucket holding the 99th percentile);
# injects random worker failures (5% of the pods marked Failed) and checks
# that every job converges to Running again with its workers replaced; with
# KWOK_FINISH=1, also marks every worker Succeeded (as a kubelet would) and
# times until every job is Succeeded (slow: one kubectl patch per pod).
# Scenarios: KWOK_SCENARIOS="big:1:2000 many:200:50" (label:jobs:workers).
# Usage: bench/kwok_scale.sh [build dir]   (default build/release)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
op_bin="$build/bin/khorovod-operator"
[ -x "$op_bin" ] || { echo "build first: scripts/build.sh release -DCMAKE_BUILD_TYPE=Release -- khorovod-operator" >&2; exit 2; }
dir=$(mktemp -d /tmp/khorovod-kwok.XXXXXX)
cleanup() { kill ${kwok_pid:-} ${op_pid:-} ${sampler_pid:-} 2>/dev/null; bash "$root/tests/operator/cluster/cluster.sh" stop "$dir/cluster"; }
trap cleanup EXIT
bash "$root/tests/operator/cluster/cluster.sh" start "$dir/cluster" >/dev/null
set -a; source "$dir/cluster/env"; set +a
k() { "$K8S_BIN/kubectl" --request-timeout=120s "$@"; }

# The scheduler at its default client QPS (50) needs 40 s just to bind 2000
# pods; clusters that run large jobs raise it. Restart it at 500.
kill "$(cat "$dir/cluster/scheduler.pid")"
"$K8S_BIN/kube-scheduler" --kubeconfig "$dir/cluster/scheduler.kubeconfig" \
  --authentication-kubeconfig "$dir/cluster/scheduler.kubeconfig" --authorization-kubeconfig "$dir/cluster/scheduler.kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --kube-api-qps 500 --kube-api-burst 1000 \
  > "$dir/scheduler.log" 2>&1 &
echo $! > "$dir/cluster/scheduler.pid"

# Fake nodes: 50 x 250 pods; kwok marks them Ready and runs their pods.
nodes=50
for i in $(seq 1 $nodes); do cat <<YAML
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
status:
  allocatable: {cpu: "256", memory: 1Ti, pods: "250"}
  capacity: {cpu: "256", memory: 1Ti, pods: "250"}
---
YAML
done | k apply -f - >/dev/null
"$K8S_BIN/kwok" --kubeconfig "$KUBECONFIG" --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake --cidr 10.200.0.1/16 --node-ip 10.199.0.1 \
  > >(grep -v '"Patch node"' > "$dir/kwok.log") 2>&1 &
kwok_pid=$!  # kwok's own pid (a pipeline's $! would be grep's, and kwok would outlive the bench)
# The API server taints new nodes not-ready; the node lifecycle controller
# that lifts the taint once kwok reports them Ready is not running here.
ready_nodes() { [ "$(k get nodes -l type=kwok --no-headers | grep -c ' Ready ')" -eq $nodes ]; }
for _ in $(seq 1 100); do ready_nodes && break; sleep 0.2; done
k taint nodes -l type=kwok node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_operator() {
  "$op_bin" --kubeconfig "$KUBECONFIG" --leader-elect=false --metrics-bind "127.0.0.1:$port" --workers 8 \
    >> "$dir/operator.log" 2>&1 &
  op_pid=$!
  for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
}
stop_operator() { kill "$op_pid"; wait "$op_pid" 2>/dev/null || true; op_pid=; }
# Highest API request count in any 1 s sample, while running in the background.
start_sampler() {
  (prev=$(api_requests); peak=0
   while sleep 1; do
     cur=$(api_requests); [ $((cur - prev)) -gt "$peak" ] && peak=$((cur - prev)); prev=$cur; echo "$peak" > "$dir/peak_rate"
   done) &
  sampler_pid=$!
}
stop_sampler() { kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=; }
metric_sum() { curl -s "127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s+=$2} END {print s+0}'; }
reconcile_p99() {  # upper bound of the bucket holding the 99th percentile
  curl -s "127.0.0.1:$port/metrics" | python3 -c '
import re, sys
b = sorted((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), float(m.group(2)))
           for m in re.finditer(r"^khorovod_operator_reconcile_duration_seconds_bucket\{le=\"([^\"]+)\"\} (\S+)", sys.stdin.read(), re.M))
total = b[-1][1]
print(next(f"{le:g}" for le, c in b if c >= 0.99 * total), int(total))'
}

job() {  # name replicas
  cat <<YAML
apiVersion: khorovod.dev/v1alpha1
kind: HorovodJob
metadata: {name: $1, namespace: sim}
spec:
  replicas: $2
  minReplicas: 1
  maxReplicas: $2
  runPolicy: {backoffLimit: 1000, cleanPodPolicy: None}
  worker:
    template:
      spec:
        tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
        containers: [{name: trainer, image: khorovod/runtime:sim, command: [khorovod-example-trainer]}]
YAML
}
running_workers() { k get pods --chunk-size=0 -n sim -l khorovod.dev/role=worker --field-selector status.phase=Running --no-headers 2>/dev/null | wc -l; }
phase_count() { k get hvdjob -n sim -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c "^$1$" || true; }
cpu_seconds() { awk '{printf "%.1f", ($14 + $15) / 100}' "/proc/$op_pid/stat"; }
rss_mib() { awk '/VmRSS/{printf "%.1f", $2 / 1024}' "/proc/$op_pid/status"; }
peak_rss_mib() { awk '/VmHWM/{printf "%.1f", $2 / 1024}' "/proc/$op_pid/status"; }
api_requests() { curl -s "127.0.0.1:$port/metrics" | awk '/^khorovod_operator_api_requests_total/{s+=$2} END {print s+0}'; }
wait_until() {  # seconds command...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -ge $deadline ] && { echo "timed out waiting for: $*" >&2; return 1; }; sleep 0.5; done
}
mark_succeeded() {  # job
  for p in $(k get pods -n sim -l "khorovod.dev/role=worker,khorovod.dev/job-name=$1" -o name); do
    echo "$p"
  done | xargs -P 8 -I{} sh -c "'$K8S_BIN/kubectl' -n sim patch {} --subresource status --type merge -p '{\"status\":{\"phase\":\"Succeeded\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}],\"containerStatuses\":[{\"name\":\"trainer\",\"image\":\"i\",\"imageID\":\"\",\"ready\":false,\"restartCount\":0,\"state\":{\"terminated\":{\"exitCode\":0}}}]}}' >/dev/null"
}

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F); kwok $("$K8S_BIN/kwok" --version 2>&1 | head -1)"
k create namespace sim >/dev/null
wait_until 30 k get serviceaccount default -n sim >/dev/null 2>&1

scenario() {  # label jobs replicas
  local label=$1 jobs=$2 n=$3 total=$(($2 * $3))
  local t0 t1 t2
  start_operator; start_sampler
  t0=$(date +%s.%N)
  for i in $(seq 1 "$jobs"); do job "$label-$i" "$n"; echo "---"; done | k apply -f - >/dev/null
  all_running() { [ "$(running_workers)" -ge "$total" ]; }
  wait_until 1800 all_running
  t1=$(date +%s.%N)
  printf '%s: %d jobs x %d workers: all %d workers Running after %.1f s\n' "$label" "$jobs" "$n" "$total" "$(echo "$t1 - $t0" | bc)"
  printf '%s: at Running: operator RSS %s MiB (peak %s MiB), API requests %d (%.1f per job), peak %s requests/s\n' "$label" \
    "$(rss_mib)" "$(peak_rss_mib)" "$(api_requests)" "$(echo "$(api_requests) / $jobs" | bc -l)" "$(cat "$dir/peak_rate")"

  # Failures: 5% of the workers fail with exit 137; every job must replace them.
  local victims; victims=$(k get pods --chunk-size=0 -n sim -l khorovod.dev/role=worker -o name | shuf -n $((total / 20)) --random-source=<(yes))
  for p in $victims; do echo "$p"; done | xargs -P 8 -I{} sh -c "'$K8S_BIN/kubectl' -n sim patch {} --subresource status --type merge -p '{\"status\":{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"trainer\",\"image\":\"i\",\"imageID\":\"\",\"ready\":false,\"restartCount\":0,\"state\":{\"terminated\":{\"exitCode\":137}}}]}}' >/dev/null"
  converged() { [ "$(running_workers)" -ge "$total" ] && [ "$(phase_count Running)" -ge "$jobs" ]; }
  local tf0; tf0=$(date +%s.%N)
  wait_until 1800 converged
  local restarts; restarts=$(k get hvdjob -n sim -o jsonpath='{range .items[*]}{.status.restartCount}{"\n"}{end}' | awk '{s+=$1} END {print s}')
  printf '%s: %d injected failures: every job back to Running with %d workers after %.1f s (restarts recorded: %d)\n' \
    "$label" "$(wc -w <<<"$victims")" "$total" "$(echo "$(date +%s.%N) - $tf0" | bc)" "$restarts"

  if [ "${KWOK_FINISH:-0}" = 1 ]; then
    t1=$(date +%s.%N)
    for i in $(seq 1 "$jobs"); do mark_succeeded "$label-$i"; done
    all_done() { [ "$(phase_count Succeeded)" -ge "$jobs" ]; }
    wait_until 1800 all_done
    t2=$(date +%s.%N)
    printf '%s: workers marked Succeeded -> all %d jobs Succeeded after %.1f s (marking included)\n' "$label" "$jobs" "$(echo "$t2 - $t1" | bc)"
  fi
  stop_sampler
  printf '%s: operator CPU %.1f s, RSS %s MiB, peak RSS %s MiB, API requests %d (%.1f per job), peak %s requests/s, throttled %.1f s, reconciles %s\n' \
    "$label" "$(cpu_seconds)" "$(rss_mib)" "$(peak_rss_mib)" "$(api_requests)" "$(echo "$(api_requests) / $jobs" | bc -l)" \
    "$(cat "$dir/peak_rate")" "$(metric_sum khorovod_operator_api_throttled_seconds_total)" \
    "$(reconcile_p99 | awk '{printf "%d, p99 <= %s s", $2, $1}')"
  curl -s "127.0.0.1:$port/metrics" | grep '^khorovod_operator_api_requests_total' | sed "s/^/$label: /"
  stop_operator
  [ "${4:-}" = last ] && return 0  # the cluster is torn down next
  k delete hvdjob -n sim --all --wait=false >/dev/null
  gone() { [ "$(k get pods --chunk-size=0 -n sim --no-headers 2>/dev/null | wc -l)" -eq 0 ]; }
  wait_until 1200 gone
}
set -- ${KWOK_SCENARIOS:-big:1:2000 many:200:50}
while [ $# -gt 0 ]; do
  IFS=: read -r label jobs n <<<"$1"; shift
  scenario "$label" "$jobs" "$n" "$([ $# -eq 0 ] && echo last)"
done
