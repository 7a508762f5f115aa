#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for the user story
# tests (tests/realnode) and for trying khorovod by hand (docs/install.md):
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
#   kube-proxy built from Go modules (scripts/k8s-tools.sh), containerd + runc
#   from Debian, CNI bridge networking (Debian's containernetworking-plugins)
#   and CoreDNS as the cluster DNS (a Deployment behind kube-dns).
#
#   real-node.sh up            bring it up (idempotent: a running node is kept)
#   real-node.sh down          stop everything it started and remove its state
#   real-node.sh status        print `kubectl get nodes,pods -A -o wide`
#   real-node.sh kubectl ARGS  kubectl as cluster admin, inside the node's network
#   real-node.sh exec CMD...   any command inside the node's network (KUBECONFIG set)
#   real-node.sh load IMAGE... images from podman into the node's containerd (scripts/images.sh load)
#   real-node.sh gpu-health ID healthy|unhealthy
#                              mark a simulated GPU (GPU-sim-<i>; `all healthy`
#                              for every one) Unhealthy or Healthy again: the
#                              device plugin tells the kubelet
#   real-node.sh prometheus    start Prometheus in the node (127.0.0.1:9090 there),
#                              scraping what the chart's monitors select (file_sd
#                              written from the API: Debian's build has no
#                              kubernetes_sd), with the dashboard's recording
#                              rules; `down` stops it
#
# Isolation: every component runs in the network namespace "khorovod-node",
# which this script creates and which has no link to the machine's own
# network. The node's address (NODE_IP, on the namespace's loopback), the pod bridge
# and the Service addresses exist only there, so nothing can route off the
# machine, whatever a pod does. Pods get routes to the cluster's ranges only.
# The kubelet sets six kernel tunables (vm.overcommit_memory, kernel.panic,
# ...); `up` records their values and `down` restores them.
# GPUs: KHOROVOD_NODE_GPUS (default 4; 0 for none) simulated nvidia.com/gpu
# devices, advertised by khorovod-device-plugin (scripts/k8s-tools.sh builds
# it) through the kubelet's device-plugin API (its sockets live in the
# kubelet's fixed /var/lib/kubelet/device-plugins; `down` removes them); the kubelet and the API server
# run with the ResourceHealthStatus feature gate, so a pod's status names the
# health of the devices it was given.
# Images: containerd keeps its image store in DIR/containerd across runs
# (scripts/images.sh load imports into it); everything else is per run.
# Needs root. Every wait is bounded; a failed `up` prints the component logs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NS=khorovod-node
NODE=khorovod-node
DIR=${KHOROVOD_NODE_DIR:-/var/lib/khorovod-node}
RUN="$DIR/run"
SOCK="$RUN/containerd.sock"
NODE_IP=10.250.0.1
POD_CIDR=10.244.0.0/16
POD_SUBNET=10.244.0.0/24
POD_GW=10.244.0.1
SVC_CIDR=10.96.0.0/16
API_SVC_IP=10.96.0.1
DNS_IP=10.96.0.10
PAUSE_IMAGE=localhost/khorovod/pause:1
GPUS=${KHOROVOD_NODE_GPUS:-4}
[[ $GPUS =~ ^[0-9]+$ ]] && [ "$GPUS" -le 64 ] || { echo "real-node: KHOROVOD_NODE_GPUS must be 0-64, not '$GPUS'" >&2; exit 2; }
GPU_HEALTH_FILE="$RUN/gpu-unhealthy"
# The kubelet serves its device-plugin Registration socket at this fixed path
# (k8s.io/kubelet's DevicePluginPath; --root-dir does not move it): one
# kubelet per machine (or mount namespace) can take device plugins.
DEVICE_PLUGIN_DIR=/var/lib/kubelet/device-plugins
CLUSTER_NAME=$NODE
API_IP=$NODE_IP
export DIR RUN SOCK NODE NODE_IP POD_CIDR POD_SUBNET POD_GW SVC_CIDR DNS_IP PAUSE_IMAGE
# shellcheck source=real-node/common.sh
source "$root/scripts/real-node/common.sh"
# shellcheck source=real-node/control-plane.sh
source "$root/scripts/real-node/control-plane.sh"
# shellcheck source=real-node/pki.sh
source "$root/scripts/real-node/pki.sh"
# shellcheck source=real-node/config.sh
source "$root/scripts/real-node/config.sh"

in_ns() { nsenter --net="/run/netns/$NS" -- "$@"; }
say() { echo "real-node: $*" >&2; }
die() { say "$*"; exit 1; }
k8s_bin() { bash "$root/scripts/k8s-tools.sh" etcd kube-apiserver kube-controller-manager kube-scheduler \
              kubectl kubelet kube-proxy coredns helm khorovod-device-plugin | tail -1; }
kubectl_admin() { in_ns "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@"; }

start() {  # name command... : runs it in the node's namespace, logs and pid in RUN
  local name=$1; shift
  start_logged "$name" nsenter --net="/run/netns/$NS" -- "$@"
}

node_untainted() { [ -z "$(kubectl_admin get node "$NODE" -o jsonpath='{.spec.taints}')" ]; }

make_netns() {
  ip netns add "$NS"
  ip -n "$NS" link set lo up
  # The node's address lives on the namespace's loopback device (this kernel
  # has no dummy links): local to every component, reachable from pods
  # through the bridge's gateway.
  ip -n "$NS" addr add "$NODE_IP/32" dev lo
  # Forwarding between the pod bridge and the node's own address, inside the
  # namespace only; bridged pod traffic passes iptables for Service DNAT.
  in_ns sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.ipv4.conf.all.route_localnet=1
}


start_node() {
  make_cgroup_root khorovod-node
  start containerd containerd --config "$RUN/containerd.toml"
  wait_for "containerd's socket" 60 ctr --address "$SOCK" version
  bash "$root/scripts/images.sh" node >&2
  bash "$root/scripts/images.sh" load "$PAUSE_IMAGE" "localhost/khorovod/coredns:$(cat "$BIN/coredns.version")" >&2
  start kubelet "$BIN/kubelet" --config "$RUN/kubelet.yaml" --kubeconfig "$RUN/kubelet.kubeconfig" \
    --hostname-override "$NODE" --node-ip "$NODE_IP" --root-dir "$RUN/kubelet" --v=1
  wait_for "node $NODE to register" 120 kubectl_admin get node "$NODE"
  wait_for "node $NODE to be Ready" 120 kubectl_admin wait --for condition=Ready --timeout 1s "node/$NODE"
  # Ready comes before the node lifecycle controller lifts the not-ready
  # taint. A pod created in between is found unschedulable, and the scheduler
  # may look at it again only at its 5-minute unschedulable flush: wait for
  # the taints to go.
  wait_for "node $NODE's startup taints to be lifted" 120 node_untainted
  start kube-proxy "$BIN/kube-proxy" --config "$RUN/kube-proxy.yaml" --v=1
  wait_for "kube-proxy's Service rules" 60 in_ns iptables -t nat -n -L KUBE-SERVICES
  start_gpus
}

node_gpus() { [ "$(kubectl_admin get node "$NODE" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = "$1" ]; }
# The simulated GPUs: the device plugin registers with the kubelet, which
# then reports them in the node's capacity and allocatable.
start_gpus() {
  [ "$GPUS" -gt 0 ] || return 0
  : > "$GPU_HEALTH_FILE"
  start device-plugin "$BIN/khorovod-device-plugin" --plugin-dir "$DEVICE_PLUGIN_DIR" \
    --count "$GPUS" --health-file "$GPU_HEALTH_FILE"
  wait_for "$GPUS nvidia.com/gpu allocatable on node $NODE" 60 node_gpus "$GPUS"
}



up() {
  preflight
  if [ -e "/run/netns/$NS" ] && BIN=$(cat "$RUN/bin" 2>/dev/null) && kubectl_admin get --raw /readyz >/dev/null 2>&1; then
    say "already up"; return 0
  fi
  down_quiet
  BIN=$(k8s_bin)
  mkdir -p "$RUN/logs" "$RUN/kubelet"
  save_tunables "$DIR/tunables.saved"
  echo "$BIN" > "$RUN/bin"
  make_netns
  make_pki "$RUN" "https://$NODE_IP:6443" "$NODE" "$NODE_IP" "$API_SVC_IP"
  write_containerd_config; write_kubelet_config; write_kube_proxy_config
  start_control_plane
  start_node
  start_dns
  kubectl_admin get nodes -o wide
  say "up: kubectl via '$0 kubectl ...' or 'nsenter --net=/run/netns/$NS kubectl --kubeconfig $RUN/admin.kubeconfig ...'"
}

down_quiet() {
  [ -d "$RUN" ] || { ip netns del "$NS" 2>/dev/null || true; return 0; }
  stop_pid device-plugin
  stop_pid kubelet
  # What the kubelet and the plugin left in the fixed plugin directory.
  rm -f "$DEVICE_PLUGIN_DIR/kubelet.sock" "$DEVICE_PLUGIN_DIR/kubelet_internal_checkpoint" "$DEVICE_PLUGIN_DIR"/khorovod-*.sock
  remove_containers "$SOCK"
  local c
  for c in prom-discovery prometheus kube-proxy containerd kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_pid "$c"; done
  kill_shims "$SOCK"
  unmount_under "$RUN"
  ip netns del "$NS" 2>/dev/null || true
  remove_cgroups khorovod-node
  restore_tunables "$DIR/tunables.saved"
  rm -rf "$RUN"
}

start_prometheus() {
  BIN=$(cat "$RUN/bin" 2>/dev/null) || die "not up"
  if live_pid prometheus >/dev/null; then say "prometheus already running"; return 0; fi
  command -v prometheus >/dev/null || die "missing prometheus (scripts/install-deps.sh installs it)"
  mkdir -p "$RUN/logs" "$RUN/prometheus-sd"
  sed -e "s|/SD_DIR|$RUN/prometheus-sd|g" -e "s|/RULES_FILE|$root/deploy/monitoring/khorovod-rules.yaml|" \
    "$root/scripts/real-node/prometheus.yml" > "$RUN/prometheus.yml"
  local kubectl_cmd
  kubectl_cmd=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' \
    nsenter --net="/run/netns/$NS" -- "$BIN/kubectl" --kubeconfig "$RUN/prometheus.kubeconfig" --request-timeout=20s)
  setsid python3 "$root/scripts/real-node/prom_discovery.py" "$kubectl_cmd" "$RUN/prometheus-sd" 2 \
    >> "$RUN/logs/prom-discovery.log" 2>&1 < /dev/null &
  record_pid prom-discovery $!
  start prometheus prometheus --config.file "$RUN/prometheus.yml" --storage.tsdb.path "$RUN/prometheus" \
    --web.listen-address 127.0.0.1:9090 --log.level warn
  wait_for "prometheus /-/ready" 60 in_ns curl -sf http://127.0.0.1:9090/-/ready
  say "prometheus: 127.0.0.1:9090 in the node (query it with '$0 exec curl ...')"
}

cmd=${1:-}
case "$cmd" in
  up) up ;;
  down) down_quiet; say "down" ;;
  status) BIN=$(cat "$RUN/bin" 2>/dev/null) || die "not up"; kubectl_admin get nodes,pods -A -o wide ;;
  kubectl) shift; BIN=$(cat "$RUN/bin" 2>/dev/null) || die "not up"
           exec nsenter --net="/run/netns/$NS" -- "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@" ;;
  prometheus) start_prometheus ;;
  load) shift; bash "$root/scripts/images.sh" load "$@" ;;
  gpu-health) shift; gpu_health "$@" ;;
  exec) shift; BIN=$(cat "$RUN/bin" 2>/dev/null) || die "not up"
        KUBECONFIG="$RUN/admin.kubeconfig" PATH="$BIN:$PATH" exec nsenter --net="/run/netns/$NS" -- "$@" ;;
  *) echo "usage: real-node.sh up|down|status|prometheus|gpu-health ID STATE|load IMAGE...|kubectl ARGS...|exec CMD..." >&2; exit 2 ;;
esac
