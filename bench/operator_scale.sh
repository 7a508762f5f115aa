#!/usr/bin/env bash
# Operator benchmark against a real kube-apiserver + etcd on loopback
# (tests/operator/cluster/cluster.sh; no kubelet, so pods stay Pending).
#   1. time from creating a HorovodJob with N workers to all N worker pods
#      existing, for N in 16 256 1024;
#   2. the operator's resident memory with 500 small (1-worker) jobs.
# Usage: bench/operator_scale.sh [build dir]   (default build/release)
# Prints one line per figure; docs/benchmarks.md records them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
op_bin="$build/bin/khorovod-operator"
[ -x "$op_bin" ] || { echo "build the operator first: scripts/build.sh release -DCMAKE_BUILD_TYPE=Release -- khorovod-operator" >&2; exit 2; }
dir=$(mktemp -d /tmp/khorovod-opbench.XXXXXX)
cleanup() { [ -n "${op_pid:-}" ] && kill "$op_pid" 2>/dev/null; bash "$root/tests/operator/cluster/cluster.sh" stop "$dir/cluster"; }
trap cleanup EXIT
bash "$root/tests/operator/cluster/cluster.sh" start "$dir/cluster" >/dev/null
set -a; source "$dir/cluster/env"; set +a
k() { "$K8S_BIN/kubectl" --request-timeout=60s "$@"; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$op_bin" --kubeconfig "$KUBECONFIG" --leader-elect=false --metrics-bind "127.0.0.1:$port" --workers 4 \
  > "$dir/operator.log" 2>&1 &
op_pid=$!
for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done

job() {  # name replicas
  cat <<YAML
apiVersion: khorovod.dev/v1alpha1
kind: HorovodJob
metadata: {name: $1}
spec:
  replicas: $2
  minReplicas: 1
  maxReplicas: $2
  worker:
    template:
      spec:
        containers: [{name: trainer, image: khorovod/runtime:bench, command: [khorovod-example-trainer]}]
YAML
}
count_pods() { k get pods -l "khorovod.dev/job-name=$1,khorovod.dev/role=worker" --no-headers 2>/dev/null | wc -l; }

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%F)"
for n in 16 256 1024; do
  start=$(date +%s.%N)
  job "scale-$n" "$n" | k apply -f - >/dev/null
  for _ in $(seq 1 1200); do [ "$(count_pods "scale-$n")" -ge "$n" ] && break; sleep 0.05; done
  end=$(date +%s.%N)
  got=$(count_pods "scale-$n")
  printf 'pods-exist: workers=%d seconds=%.2f (pods seen: %d)\n' "$n" "$(echo "$end - $start" | bc)" "$got"
  k delete hvdjob "scale-$n" --wait=false >/dev/null
done

for i in $(seq 1 500); do job "small-$i" 1; echo "---"; done | k apply -f - >/dev/null
for _ in $(seq 1 1200); do
  [ "$(k get pods -l khorovod.dev/role=worker,khorovod.dev/job-name --no-headers 2>/dev/null | grep -c '^small-')" -ge 500 ] && break
  sleep 0.2
done
sleep 2
rss_kb=$(awk '/VmRSS/{print $2}' "/proc/$op_pid/status")
printf 'memory: jobs=500 rss_mib=%.1f\n' "$(echo "$rss_kb / 1024" | bc -l)"
curl -s "127.0.0.1:$port/metrics" | grep -E '^khorovod_operator_api_requests_total' | awk '{s+=$2} END {printf "api-requests: total=%d for 503 jobs\n", s}'
