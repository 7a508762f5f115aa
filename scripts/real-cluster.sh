#!/usr/bin/env bash
# A real multi-node Kubernetes cluster on this machine, for the multi-node
# stage (tests/multinode) and for trying node loss by hand (docs/install.md):
# one control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler) and NODES nodes (default 3), each with its own containerd,
# kubelet, kube-proxy and simulated-GPU device plugin; CoreDNS as the
# cluster DNS. The same binaries, configuration and certificates as the
# single real node (scripts/real-node.sh; shared in scripts/real-node/).
#
#   real-cluster.sh up              bring it up (a running cluster is kept)
#   real-cluster.sh down            stop everything it started, remove its state
#   real-cluster.sh status          `kubectl get nodes,pods -A -o wide`
#   real-cluster.sh kubectl ARGS    kubectl as cluster admin
#   real-cluster.sh exec CMD...     a command in the control plane's network
#                                   (KUBECONFIG and PATH set: helm, kubectl)
#   real-cluster.sh node-exec I CMD...  a command in node I's network and mounts
#   real-cluster.sh node-stop I     node I crashes: kubelet, kube-proxy, device
#                                   plugin, containerd and every container
#                                   SIGKILLed (its network stays up)
#   real-cluster.sh node-start I    node I boots again: its runtime state wiped,
#                                   containerd, kubelet, kube-proxy, plugin started
#   real-cluster.sh net-cut I       node I's link down: it runs on, unreachable
#   real-cluster.sh net-restore I   its link up again
#   real-cluster.sh link-rate RATE  every node link limited to RATE (tc tbf,
#                                   e.g. 1gbit, 10gbit) in both directions
#   real-cluster.sh gpu-health I ID healthy|unhealthy
#                                   a simulated GPU of node I (as real-node.sh)
#   real-cluster.sh load IMAGE...   images from podman into every node's containerd
#
# Environment: KHOROVOD_CLUSTER_NODES (1-9, default 3);
# KHOROVOD_CLUSTER_GPUS simulated nvidia.com/gpu per node, comma-separated,
# the last repeated (default "2,2,0": two GPU nodes and a CPU node; GPU
# nodes are labeled nvidia.com/gpu.present=true); KHOROVOD_CLUSTER_LINK_RATE
# (default 10gbit); KHOROVOD_CLUSTER_DIR (default /var/lib/khorovod-cluster,
# which keeps each node's containerd image store across runs).
#
# Names are its own (namespaces khvc-cp and khvc-n<i>, cgroup roots
# khvc-n<i>, bridges khvc-br and khvc-cni0, addresses 10.251.0.0/24 for the
# nodes, 10.245.0.0/16 for pods, 10.97.0.0/16 for Services), so it runs
# beside the single real node. scripts/real-node/cluster-net.sh describes
# the network and the mount namespaces. Node khvc-n1 also holds the cluster
# add-ons (CoreDNS; the tests put the operator there too): the node-loss
# scenarios stop the others. NetworkPolicy is not enforced (no policy agent).
# Needs root. Every wait is bounded; a failed `up` prints the component logs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
DIR=${KHOROVOD_CLUSTER_DIR:-/var/lib/khorovod-cluster}
RUN="$DIR/run"
CP_RUN=$RUN   # RUN names a node's run directory while its configuration is written
CP_NS=khvc-cp
CLUSTER_NAME=khorovod-cluster
# The node lifecycle controller marks a silent node NotReady after this
# (Kubernetes' default is 40 s; 30 s still spans two 10 s lease renewals
# and a margin against flapping on a loaded 2-core machine): the node-loss
# scenarios measure the operator's own bound (nodeLossTimeoutSeconds) on top.
NODE_MONITOR_GRACE=${KHOROVOD_CLUSTER_NODE_MONITOR_GRACE:-30s}
NODES=${KHOROVOD_CLUSTER_NODES:-3}
[[ $NODES =~ ^[1-9]$ ]] || { echo "real-cluster: KHOROVOD_CLUSTER_NODES must be 1-9, not '$NODES'" >&2; exit 2; }
GPUS_SPEC=${KHOROVOD_CLUSTER_GPUS:-2,2,0}
[[ $GPUS_SPEC =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "real-cluster: KHOROVOD_CLUSTER_GPUS must be counts like 2,2,0, not '$GPUS_SPEC'" >&2; exit 2; }
LINK_RATE=${KHOROVOD_CLUSTER_LINK_RATE:-10gbit}
NODE_NET_PREFIX=10.251.0
API_IP=$NODE_NET_PREFIX.1
POD_NET_PREFIX=10.245
POD_CIDR=10.245.0.0/16
SVC_CIDR=10.97.0.0/16
API_SVC_IP=10.97.0.1
DNS_IP=10.97.0.10
PAUSE_IMAGE=localhost/khorovod/pause:1
DEVICE_PLUGIN_DIR=/var/lib/kubelet/device-plugins   # inside each node's mount namespace
# Pods are routed to every node (the nodes' own addresses included); the
# API server reaches webhooks and aggregated APIs at their endpoints, as it
# has no kube-proxy of its own.
APISERVER_EXTRA_ARGS=(--enable-aggregator-routing=true)
source "$root/scripts/real-node/common.sh"
source "$root/scripts/real-node/control-plane.sh"
source "$root/scripts/real-node/pki.sh"
source "$root/scripts/real-node/config.sh"
source "$root/scripts/real-node/cluster-net.sh"

say() { echo "real-cluster: $*" >&2; }
die() { say "$*"; exit 1; }
valid_rate "$LINK_RATE" || die "KHOROVOD_CLUSTER_LINK_RATE must be like 1gbit or 10gbit, not '$LINK_RATE'"
k8s_bin() { bash "$root/scripts/k8s-tools.sh" etcd kube-apiserver kube-controller-manager kube-scheduler \
              kubectl kubelet kube-proxy coredns helm khorovod-device-plugin | tail -1; }
kubectl_admin() { nsenter --net="/run/netns/$CP_NS" -- "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@"; }
start() { local name=$1; shift; start_logged "$name" nsenter --net="/run/netns/$CP_NS" -- "$@"; }
start_on() {  # I NAME COMMAND...: in node I's network and mount namespaces
  local i=$1 name=$2; shift 2
  start_logged "n$i-$name" nsenter --net="/run/netns/$(node_ns "$i")" --mount="$(mnt_pin "$i")" -- "$@"
}
node_gpus_of() { local counts; IFS=, read -r -a counts <<<"$GPUS_SPEC"; local n=${#counts[@]}; echo "${counts[$(( $1 <= n ? $1 - 1 : n - 1 ))]}"; }
node_sock() { echo "$(node_dir "$1")/run/containerd.sock"; }
# containerd_up I: its socket answers (ctr waits ~10 s for a socket that is not there).
containerd_up() { local s; s=$(node_sock "$1"); [ -S "$s" ] && timeout 5 ctr --address "$s" version; }
need_up() { BIN=$(cat "$RUN/bin" 2>/dev/null) && [ -e "/run/netns/$CP_NS" ] || die "not up (run: $0 up)"; }
need_node() { [[ ${1:-} =~ ^[1-9]$ ]] && [ "$1" -le "$NODES" ] || die "node index must be 1-$NODES, not '${1:-}'"; }

# with_node_env I COMMAND...: the variables config.sh and images.sh read, for node I.
with_node_env() {
  local i=$1; shift
  local nd sock name ip subnet cg
  nd=$(node_dir "$i"); sock=$(node_sock "$i"); name=$(node_name "$i"); ip=$(node_ip "$i")
  subnet=$(node_pod_subnet "$i"); cg=$(node_ns "$i")
  DIR=$nd RUN=$nd/run SOCK=$sock NODE=$name NODE_IP=$ip POD_SUBNET=$subnet POD_GW=$POD_NET_PREFIX.$i.1 \
  CGROUP_ROOT=$cg CNI_BRIDGE=khvc-cni0 NODE_ROUTE=$NODE_NET_PREFIX.0/24 KHOROVOD_NODE_DIR=$nd "$@"
}
write_node_configs() {  # (within with_node_env)
  mkdir -p "$RUN/kubelet"
  make_node_pki "$CP_RUN" "$RUN" "https://$API_IP:6443" "$NODE" "$NODE_IP"
  cp "$CP_RUN/kube-proxy.kubeconfig" "$RUN/"
  write_containerd_config; write_kubelet_config; write_kube_proxy_config
}

start_containerd() {  # I
  make_cgroup_root "$(node_ns "$1")"
  start_on "$1" containerd containerd --config "$(node_dir "$1")/run/containerd.toml"
}
start_kubelet() {  # I
  local i=$1 labels="khorovod.dev/cluster=$CLUSTER_NAME"
  [ "$(node_gpus_of "$i")" -gt 0 ] && labels+=",nvidia.com/gpu.present=true"
  start_on "$i" kubelet "$BIN/kubelet" --config "$(node_dir "$i")/run/kubelet.yaml" \
    --kubeconfig "$(node_dir "$i")/run/kubelet.kubeconfig" --hostname-override "$(node_name "$i")" \
    --node-ip "$(node_ip "$i")" --root-dir "$(node_dir "$i")/run/kubelet" --node-labels "$labels" --v=1
}
start_device_plugin() {  # I
  local i=$1 gpus; gpus=$(node_gpus_of "$1")
  [ "$gpus" -gt 0 ] || return 0
  : > "$(node_dir "$i")/run/gpu-unhealthy"
  start_on "$i" device-plugin "$BIN/khorovod-device-plugin" --plugin-dir "$DEVICE_PLUGIN_DIR" \
    --count "$gpus" --health-file "$(node_dir "$i")/run/gpu-unhealthy"
}
node_ready_untainted() {  # I: Ready and without startup taints
  local s; s=$(kubectl_admin get node "$(node_name "$1")" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}/{.spec.taints}')
  [ "$s" = "True/" ]
}
node_gpus_are() { [ "$(kubectl_admin get node "$(node_name "$1")" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = "$2" ]; }
wait_node() {  # I: kubelet registered and Ready, taints lifted, plugin's GPUs allocatable
  local i=$1 gpus; gpus=$(node_gpus_of "$1")
  wait_for "node $(node_name "$i") Ready and untainted" 180 node_ready_untainted "$i"
  [ "$gpus" -eq 0 ] || wait_for "$gpus nvidia.com/gpu on $(node_name "$i")" 90 node_gpus_are "$i" "$gpus"
}
# boot_node I: containerd (its runtime state wiped first: a boot), kubelet,
# kube-proxy and the device plugin; does not wait for the node.
boot_node() {
  local i=$1 sock; sock=$(node_sock "$1")
  start_containerd "$i"
  wait_for "containerd of node $i" 60 containerd_up "$i"
  in_node "$i" bash -c "source '$root/scripts/real-node/common.sh'; remove_containers '$sock'"
  start_kubelet "$i"
  start_on "$i" kube-proxy "$BIN/kube-proxy" --config "$(node_dir "$i")/run/kube-proxy.yaml" --v=1
  start_device_plugin "$i"
}
load_images() {  # IMAGE...: into every node, one after the other (each a podman save)
  local i
  for ((i = 1; i <= NODES; i++)); do
    with_node_env "$i" env KHOROVOD_IMAGE_SAVE_TMP="/var/tmp/khorovod-cluster-image-save" \
      bash "$root/scripts/images.sh" load "$@" >&2 || return 1
  done
}

up() {
  preflight
  command -v tc >/dev/null || die "missing tc (package iproute2)"
  if BIN=$(cat "$RUN/bin" 2>/dev/null) && [ -e "/run/netns/$CP_NS" ] && kubectl_admin get --raw /readyz >/dev/null 2>&1; then
    say "already up"; return 0
  fi
  down_quiet
  BIN=$(k8s_bin)
  bash "$root/scripts/images.sh" node >&2
  mkdir -p "$RUN/logs"
  echo "$BIN" > "$RUN/bin"
  echo "$NODES" > "$RUN/nodes"
  save_tunables "$DIR/tunables.saved"
  make_cp_netns
  make_cluster_pki "$RUN" "https://$API_IP:6443" "$API_IP" "$API_SVC_IP"
  start_control_plane
  local i
  for ((i = 1; i <= NODES; i++)); do
    make_node_netns "$i"; make_mount_ns "$i"
    with_node_env "$i" write_node_configs
    start_containerd "$i"
  done
  for ((i = 1; i <= NODES; i++)); do wait_for "containerd of node $i" 60 containerd_up "$i"; done
  load_images "$PAUSE_IMAGE" "localhost/khorovod/coredns:$(cat "$BIN/coredns.version")" || die "loading the node images failed"
  for ((i = 1; i <= NODES; i++)); do
    start_kubelet "$i"
    start_on "$i" kube-proxy "$BIN/kube-proxy" --config "$(node_dir "$i")/run/kube-proxy.yaml" --v=1
    start_device_plugin "$i"
  done
  for ((i = 1; i <= NODES; i++)); do wait_node "$i"; done
  COREDNS_NODE=$(node_name 1) start_dns
  kubectl_admin get nodes -o wide
  say "up: kubectl via '$0 kubectl ...'"
}

# stop_node I KILL|TERM: every process of node I, and its containers. With
# KILL (a crash) everything is signalled at once before anything is waited for.
stop_node() {
  local i=$1 sig=$2 sock c pid; sock=$(node_sock "$1")
  for c in device-plugin kubelet kube-proxy containerd; do
    pid=$(live_pid "n$i-$c") && kill "-$sig" "$pid" 2>/dev/null
  done
  [ "$sig" = KILL ] && kill_cgroup "$(node_ns "$i")"
  for c in device-plugin kubelet kube-proxy; do stop_pid "n$i-$c" "$sig"; done
  kill_cgroup "$(node_ns "$i")"
  stop_pid "n$i-containerd" "$sig"
  kill_shims "$sock"
  kill_cgroup "$(node_ns "$i")"
}

down_quiet() {
  [ -d "$RUN" ] || { ip netns del "$CP_NS" 2>/dev/null || true; return 0; }
  local n i; n=$(cat "$RUN/nodes" 2>/dev/null || echo "$NODES")
  for ((i = 1; i <= n; i++)); do
    for c in device-plugin kubelet kube-proxy; do stop_pid "n$i-$c"; done
    [ -e "$(mnt_pin "$i")" ] && { in_node "$i" bash -c "source '$root/scripts/real-node/common.sh'; remove_containers '$(node_sock "$i")'" 2>/dev/null || true; }
    stop_node "$i" TERM
    remove_mount_ns "$i"
    unmount_under "$(node_dir "$i")/run"
    ip netns del "$(node_ns "$i")" 2>/dev/null || true
    remove_cgroups "$(node_ns "$i")"
    rm -rf "$(node_dir "$i")/run"
  done
  for c in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_pid "$c"; done
  ip netns del "$CP_NS" 2>/dev/null || true
  remove_mount_root
  restore_tunables "$DIR/tunables.saved"
  rm -rf "$RUN"
}

gpu_health_of() {  # I ID STATE
  need_node "${1:-}"
  local f; f="$(node_dir "$1")/run/gpu-unhealthy"
  [ -f "$f" ] || die "node $1 has no simulated GPUs"
  GPU_HEALTH_FILE=$f gpu_health "$2" "$3"
}

cmd=${1:-}; [ $# -gt 0 ] && shift
case "$cmd" in
  up) up ;;
  down) down_quiet; say "down" ;;
  status) need_up; kubectl_admin get nodes,pods -A -o wide ;;
  kubectl) need_up; exec nsenter --net="/run/netns/$CP_NS" -- "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@" ;;
  exec) need_up; KUBECONFIG="$RUN/admin.kubeconfig" PATH="$BIN:$PATH" exec nsenter --net="/run/netns/$CP_NS" -- "$@" ;;
  node-exec) need_up; need_node "${1:-}"; i=$1; shift; in_node "$i" "$@" ;;
  node-stop) need_up; need_node "${1:-}"; stop_node "$1" KILL; say "node $1 stopped (crashed)" ;;
  node-start) need_up; need_node "${1:-}"; live_pid "n$1-kubelet" >/dev/null && die "node $1 is running"
              boot_node "$1"; wait_node "$1"; say "node $1 started" ;;
  net-cut) need_up; need_node "${1:-}"; net_cut "$1"; say "node $1's link is down" ;;
  net-restore) need_up; need_node "${1:-}"; net_restore "$1"; say "node $1's link is up" ;;
  link-rate) need_up; valid_rate "${1:-}" || die "RATE must be like 1gbit or 10gbit"
             for ((i = 1; i <= NODES; i++)); do set_link_rate "$i" "$1"; done; say "every link at $1" ;;
  gpu-health) need_up; gpu_health_of "$@" ;;
  load) need_up; load_images "$@" ;;
  *) echo "usage: real-cluster.sh up|down|status|kubectl ARGS|exec CMD|node-exec I CMD|node-stop I|node-start I|net-cut I|net-restore I|link-rate RATE|gpu-health I ID STATE|load IMAGE..." >&2; exit 2 ;;
esac
