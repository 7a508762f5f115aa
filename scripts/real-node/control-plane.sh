#!/usr/bin/env bash
# shellcheck disable=SC2154  # root, work, here: set by the script that sources this one
# The control plane and the cluster add-ons shared by the single real node
# (scripts/real-node.sh) and the multi-node cluster (scripts/real-cluster.sh);
# sourced, not run. The caller defines start NAME COMMAND... (runs it where
# the API server belongs, logs in RUN), kubectl_admin, say and dump_logs,
# and sets BIN, RUN, CLUSTER_NAME, optionally COREDNS_NODE (the node CoreDNS runs on), API_IP (the API server's advertised
# address), SVC_CIDR, DNS_IP and optionally APISERVER_EXTRA_ARGS (an array).

# etcd, kube-apiserver, kube-controller-manager and kube-scheduler; returns
# once the API server is ready.
start_control_plane() {
  start etcd "$BIN/etcd" --name "$CLUSTER_NAME" --data-dir "$RUN/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "$CLUSTER_NAME=http://127.0.0.1:2380" --unsafe-no-fsync --log-level warn
  local pki="$RUN/pki"
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --bind-address 0.0.0.0 --advertise-address "$API_IP" --secure-port 6443 \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$SVC_CIDR" --allow-privileged=true --profiling=false \
    --feature-gates ResourceHealthStatus=true --v=1 ${APISERVER_EXTRA_ARGS[@]+"${APISERVER_EXTRA_ARGS[@]}"}
  wait_for "kube-apiserver /readyz" 120 kubectl_admin get --raw /readyz
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$RUN/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$RUN/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$RUN/controller-manager.kubeconfig" \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials=true --cluster-name "$CLUSTER_NAME" --leader-elect=false \
    ${NODE_MONITOR_GRACE:+--node-monitor-grace-period "$NODE_MONITOR_GRACE"} \
    --bind-address 127.0.0.1 --secure-port 10257 --v=1
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$RUN/scheduler.kubeconfig" \
    --authentication-kubeconfig "$RUN/scheduler.kubeconfig" --authorization-kubeconfig "$RUN/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 10259 --v=1
}

# CoreDNS behind kube-dns at DNS_IP, and the read-only role Prometheus's
# discovery uses; returns once CoreDNS is rolled out.
start_dns() {
  local pin="" # a cluster keeps its add-ons on one node
  [ -z "${COREDNS_NODE:-}" ] || pin="/serviceAccountName: coredns/a\\      nodeSelector: {kubernetes.io/hostname: $COREDNS_NODE}"
  sed -e "s/COREDNS_VERSION/$(cat "$BIN/coredns.version")/" -e "s/DNS_IP/$DNS_IP/" -e "$pin" \
    "$root/scripts/real-node/coredns.yaml" | kubectl_admin apply -f - >/dev/null
  # Prometheus's discovery (real-node.sh prometheus) reads the API as this user: list/watch only.
  kubectl_admin apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "khorovod-node:prometheus"}
rules:
- {apiGroups: [""], resources: [pods, services, endpoints, nodes], verbs: [get, list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
- {nonResourceURLs: [/metrics], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "khorovod-node:prometheus"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "khorovod-node:prometheus"}
subjects: [{kind: User, name: "khorovod-node:prometheus", apiGroup: rbac.authorization.k8s.io}]
EOF
  kubectl_admin -n kube-system rollout status deployment/coredns --timeout 180s >&2 || { dump_logs; return 1; }
}
