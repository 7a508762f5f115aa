#!/usr/bin/env bash
# A throwaway Kubernetes control plane on loopback, for the operator tests:
# etcd, kube-apiserver (RBAC on, TLS with a CA made here) and
# kube-controller-manager (garbage collection, service accounts, namespaces,
# deployments and replica sets)
# and kube-scheduler,
# all built from Go modules by scripts/k8s-tools.sh.
#
#   cluster.sh start DIR   start it; writes DIR/admin.kubeconfig, DIR/env
#                          (APISERVER_PORT, ...) and installs crds/
#   cluster.sh stop DIR    stop every process it started and remove DIR
#   cluster.sh restart-apiserver DIR   restart kube-apiserver (same ports, same etcd)
#
# No kubelet runs: tests set pod status through the API, as a kubelet would.
# HorovodJob watches bypass the watch cache and etcd is compacted every 5 s,
# so a watch resumed from an old resourceVersion really expires (410 Gone).
# Every wait is bounded; a failed start prints the component logs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cmd=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

stop_cluster() {
  for pidfile in "$dir"/*.pid; do
    [ -f "$pidfile" ] || continue
    kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  for pidfile in "$dir"/*.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

dump_logs() {
  for log in "$dir"/*.log; do echo "---- $log (last 30 lines)"; tail -30 "$log"; done >&2
}

start_apiserver() {
  "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --endpoint-reconciler-type none \
    --enable-priority-and-fairness=false --max-requests-inflight 2000 --max-mutating-requests-inflight 1000 \
    --watch-cache-sizes horovodjobs.khorovod.dev#0 --etcd-compaction-interval 5s \
    --profiling=false --v=1 >> "$dir/apiserver.log" 2>&1 &
  echo $! > "$dir/apiserver.pid"
}

wait_apiserver_ready() {
  for _ in $(seq 1 240); do
    if "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1; then return 0; fi
    kill -0 "$(cat "$dir/apiserver.pid")" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

if [ "$cmd" = restart-apiserver ]; then
  set -a; source "$dir/env"; set +a
  bin=$K8S_BIN; pki="$dir/pki"; etcd_port=$ETCD_PORT; api_port=$APISERVER_PORT
  pid=$(cat "$dir/apiserver.pid")
  kill "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  start_apiserver
  wait_apiserver_ready || { echo "cluster.sh: kube-apiserver did not come back" >&2; dump_logs; exit 1; }
  echo "cluster.sh: kube-apiserver restarted"
  exit 0
fi

if [ "$cmd" = stop ]; then
  [ -d "$dir" ] || exit 0
  stop_cluster
  rm -rf "$dir"
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: cluster.sh start|stop|restart-apiserver DIR" >&2; exit 2; }

bin=$(bash "$root/scripts/k8s-tools.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl helm | tail -1)
rm -rf "$dir"; mkdir -p "$dir/pki" "$dir/etcd"
pki="$dir/pki"

# --- certificates: a CA, the apiserver's serving cert, an admin client, SA keys.
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=khorovod-test-ca" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt"
issue() {  # name subject [extfile]
  openssl_quiet req -newkey rsa:2048 -nodes -subj "$2" -keyout "$pki/$1.key" -out "$pki/$1.csr"
  openssl_quiet x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -out "$pki/$1.crt" ${3:+-extfile "$3"}
}
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' > "$pki/server.ext"
printf 'extendedKeyUsage=clientAuth\n' > "$pki/client.ext"
issue apiserver "/CN=kube-apiserver" "$pki/server.ext"
issue admin "/O=system:masters/CN=khorovod-test-admin" "$pki/client.ext"
# The controller-manager acts for every controller it runs (garbage collection
# must read and delete any kind), as its per-controller service accounts would.
issue controller-manager "/O=system:masters/CN=system:kube-controller-manager" "$pki/client.ext"
issue scheduler "/CN=system:kube-scheduler" "$pki/client.ext"
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

etcd_port=$(free_port); etcd_peer=$(free_port); api_port=$(free_port)

kubeconfig() {  # file user
  cat > "$1" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: test
  context: {cluster: test, user: $2, namespace: default}
current-context: test
KCFG
}
kubeconfig "$dir/admin.kubeconfig" admin
kubeconfig "$dir/controller-manager.kubeconfig" controller-manager
kubeconfig "$dir/scheduler.kubeconfig" scheduler

"$bin/etcd" --name default --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "default=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync --log-level warn \
  > "$dir/etcd.log" 2>&1 &
echo $! > "$dir/etcd.pid"

start_apiserver

kubectl() { "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }
if ! wait_apiserver_ready; then echo "cluster.sh: kube-apiserver did not become ready" >&2; dump_logs; stop_cluster; exit 1; fi

# CRDs first: the garbage collector's REST mapper then knows HorovodJob from
# its first discovery, instead of after a periodic re-sync.
kubectl apply -f "$root/crds/" >/dev/null
kubectl wait --for condition=Established --timeout 60s crd/horovodjobs.khorovod.dev >/dev/null

"$bin/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
  --controllers garbage-collector-controller,serviceaccount-controller,namespace-controller,deployment-controller,replicaset-controller,disruption-controller \
  --use-service-account-credentials=false --leader-elect=false \
  --bind-address 127.0.0.1 --secure-port 0 --v=1 > "$dir/controller-manager.log" 2>&1 &
echo $! > "$dir/controller-manager.pid"

# The scheduler binds pods to nodes; only the end-to-end test registers a node
# (its node agent), so elsewhere pods stay Pending and unscheduled.
"$bin/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
  --authentication-kubeconfig "$dir/scheduler.kubeconfig" --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --v=1 > "$dir/scheduler.log" 2>&1 &
echo $! > "$dir/scheduler.pid"

# The default service account appears once the controller-manager runs; pods need it.
for _ in $(seq 1 120); do kubectl get serviceaccount default >/dev/null 2>&1 && break; sleep 0.5; done
kubectl get serviceaccount default >/dev/null || { echo "cluster.sh: no default service account" >&2; dump_logs; stop_cluster; exit 1; }

cat > "$dir/env" <<ENV
APISERVER_PORT=$api_port
ETCD_PORT=$etcd_port
KUBECONFIG=$dir/admin.kubeconfig
K8S_BIN=$bin
ENV
echo "cluster.sh: $("$bin/kube-apiserver" --version) up on https://127.0.0.1:$api_port (etcd $etcd_port)"
