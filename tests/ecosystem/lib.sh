# shellcheck shell=bash disable=SC2154  # root: set by the test that sources this
# Shared pieces of the ecosystem tests (sourced, not run): a throwaway control
# plane from tests/operator/cluster/cluster.sh, kwok nodes, the operator, and
# a tally of named checks ending in "NAME: N passed, M failed".
# Every process started here is tracked by pid and stopped on exit; every wait
# is bounded.

eco_pids=()
eco_passed=0
eco_failed=0

k() { "$K8S_BIN/kubectl" --kubeconfig "$dir/cluster/admin.kubeconfig" --request-timeout=60s "$@"; }

eco_cleanup() {
  local pid
  for pid in "${eco_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${eco_pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  bash "$root/tests/operator/cluster/cluster.sh" stop "$dir/cluster" || true
  if [ "${KHOROVOD_ECO_KEEP:-0}" = 1 ] || [ "$eco_failed" -gt 0 ]; then echo "logs kept in $dir"; else rm -rf "$dir"; fi
}

eco_start_cluster() {  # name
  dir=$(mktemp -d "/tmp/khorovod-eco-$1.XXXXXX")
  trap eco_cleanup EXIT
  bash "$root/tests/operator/cluster/cluster.sh" start "$dir/cluster" >/dev/null
  set -a; source "$dir/cluster/env"; set +a
}

eco_tools() {  # binary...: builds (or finds cached) and sets K8S_BIN to their directory
  K8S_BIN=$(bash "$root/scripts/k8s-tools.sh" "$@" | tail -1)
}

eco_track() { eco_pids+=("$1"); }  # pid name

eco_dump_logs() {
  local log
  for log in "$dir"/*.log; do echo "---- $log (last 40 lines)"; tail -40 "$log"; done >&2
}

wait_until() {  # seconds command...
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [ $SECONDS -ge $deadline ] && return 1; sleep 0.5; done
}

check() {  # description command...
  local what=$1; shift
  if "$@" >/dev/null 2>&1; then
    echo "PASS: $what"; eco_passed=$((eco_passed + 1))
  else
    echo "FAIL: $what"; eco_failed=$((eco_failed + 1))
  fi
}

crds_established() {  # crd...
  local c
  for c in "$@"; do
    [ "$(k get crd "$c" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ] || return 1
  done
}

eco_finish() {  # name
  [ "$eco_failed" -eq 0 ] || eco_dump_logs
  echo "$1: $eco_passed passed, $eco_failed failed"
  [ "$eco_failed" -eq 0 ]
}

# kwok makes nodes with the annotation Ready and runs the pods bound to them.
eco_start_kwok() {
  eco_tools kwok kubectl
  "$K8S_BIN/kwok" --kubeconfig "$KUBECONFIG" --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake --cidr 10.200.0.1/16 --node-ip 10.199.0.1 \
    > "$dir/kwok.log" 2>&1 &
  eco_track $! kwok
}

eco_add_nodes() {  # pool first last cpu [extra labels as "k: v, ..."] [extra capacity as "k: v, ..."]
  local pool=$1 first=$2 last=$3 cpu=$4 extra=${5:-} more=${6:-} i
  for i in $(seq "$first" "$last"); do cat <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $pool-$i
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {pool: $pool, kubernetes.io/hostname: $pool-$i${extra:+, $extra}}
status:
  allocatable: {cpu: "$cpu", memory: 64Gi, pods: "110"${more:+, $more}}
  capacity: {cpu: "$cpu", memory: 64Gi, pods: "110"${more:+, $more}}
---
YAML
  done | k apply -f - >/dev/null
  # The API server taints new nodes not-ready; the node lifecycle controller
  # that lifts it once kwok reports them Ready does not run here.
  for i in $(seq "$first" "$last"); do
    wait_until 30 eval "k get node $pool-$i --no-headers | grep -q ' Ready '" || true
    k taint node "$pool-$i" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  done
}

eco_start_operator() {  # binary args...
  local bin=$1; shift
  op_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$bin" --kubeconfig "$KUBECONFIG" --leader-elect=false --metrics-bind "127.0.0.1:$op_port" "$@" \
    > "$dir/operator.log" 2>&1 &
  eco_track $! operator
  wait_until 30 curl -sf "127.0.0.1:$op_port/readyz"
}
