#!/usr/bin/env bash
# The multi-node cluster's network and per-node namespaces (sourced by
# scripts/real-cluster.sh, which sets DIR, CP_NS, API_IP, NODE_NET_PREFIX,
# POD_NET_PREFIX, SVC_CIDR and NODES, and defines in_cp, say, die; and by
# bench/crossnode.sh, which sets NET_NAME_PREFIX to keep its own names).
# NET_NAME_PREFIX [khvc] starts every name below (khvc-br, khvc-n<i>, ...).
#
# Topology: the control plane's network namespace (CP_NS) holds a bridge
# (khvc-br, API_IP/24) and, for each node i, one end of a veth pair
# (khvc-v<i>) whose other end is eth0 in the node's namespace (khvc-n<i>,
# NODE_NET_PREFIX.(10+i)). Node i's pods live on its own bridge (khvc-cni0)
# in POD_NET_PREFIX.<i>.0/24; every namespace has a route to every other
# node's pod subnet through that node's address. No namespace has a default
# route, no rule masquerades, and the machine's own network is never linked:
# nothing leaves the machine. Each veth end is limited with tc tbf in its
# egress direction (both directions of a node's link), at LINK_RATE.
#
# Each node also has its own mount namespace, pinned at DIR/mnt/n<i>: a slave
# of the machine's (so the machine's unmounts reach it, its own mounts stay
# in it), in which the kubelet's fixed paths (/var/lib/kubelet/device-plugins,
# /var/log/pods, /var/log/containers) and containerd's pod network namespaces
# (/run/netns) are private bind mounts of the node's directories. Three
# kubelets and device plugins so coexist with each other and with the single
# real node (scripts/real-node.sh), and the machine's `ip netns` never lists
# a node's pods.

: "${NET_NAME_PREFIX:=khvc}"
node_ns() { echo "$NET_NAME_PREFIX-n$1"; }
node_name() { echo "$NET_NAME_PREFIX-n$1"; }
node_ip() { echo "$NODE_NET_PREFIX.$((10 + $1))"; }
node_pod_subnet() { echo "$POD_NET_PREFIX.$1.0/24"; }
node_dir() { echo "$DIR/n$1"; }
mnt_pin() { echo "$DIR/mnt/n$1"; }
# in_node I COMMAND...: in node I's network and mount namespaces.
in_node() { local i=$1; shift; nsenter --net="/run/netns/$(node_ns "$i")" --mount="$(mnt_pin "$i")" -- "$@"; }

# burst_of RATE: enough for a GSO packet and a few timer ticks (as in
# bench/hierarchical_netns.sh).
burst_of() {
  case $1 in
    1gbit) echo 256kb ;;
    10gbit) echo 2mb ;;
    *) echo 1mb ;;
  esac
}
valid_rate() { [[ $1 =~ ^[0-9]+(k|m|g)bit$ ]]; }

make_cp_netns() {
  ip netns add "$CP_NS"
  ip -n "$CP_NS" link set lo up
  ip -n "$CP_NS" link add "$NET_NAME_PREFIX-br" type bridge
  ip -n "$CP_NS" addr add "$API_IP/24" dev "$NET_NAME_PREFIX-br"
  ip -n "$CP_NS" link set "$NET_NAME_PREFIX-br" up
  ip netns exec "$CP_NS" sysctl -qw net.ipv4.ip_forward=0 net.bridge.bridge-nf-call-iptables=0
}

# make_node_netns I: the namespace, its link to the control plane's bridge and its routes.
make_node_netns() {
  local i=$1 ns; ns=$(node_ns "$1")
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add "$NET_NAME_PREFIX-v$i" netns "$CP_NS" type veth peer name eth0 netns "$ns"
  ip -n "$CP_NS" link set "$NET_NAME_PREFIX-v$i" master "$NET_NAME_PREFIX-br" up
  ip -n "$ns" addr add "$(node_ip "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  # Forwarding between the pod bridge and eth0; bridged pod traffic passes
  # iptables for Service DNAT; loose reverse-path checks (replies of Service
  # traffic come back on another interface than the DNATed request left by).
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 \
    net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
  ip -n "$ns" route add "$SVC_CIDR" dev eth0
  local j
  for ((j = 1; j <= NODES; j++)); do
    [ "$j" -eq "$i" ] || ip -n "$ns" route add "$(node_pod_subnet "$j")" via "$(node_ip "$j")"
  done
  ip -n "$CP_NS" route add "$(node_pod_subnet "$i")" via "$(node_ip "$i")"
  set_link_rate "$i" "$LINK_RATE"
}

# set_link_rate I RATE: tbf on both ends of node I's link.
set_link_rate() {
  local i=$1 rate=$2 burst; burst=$(burst_of "$2")
  ip netns exec "$(node_ns "$i")" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms
  ip netns exec "$CP_NS" tc qdisc replace dev "$NET_NAME_PREFIX-v$i" root tbf rate "$rate" burst "$burst" latency 50ms
}

# net_cut I / net_restore I: node I's link down (its carrier too) or up again.
net_cut() { ip -n "$CP_NS" link set "$NET_NAME_PREFIX-v$1" down; }
net_restore() { ip -n "$CP_NS" link set "$NET_NAME_PREFIX-v$1" up; }

# make_mount_ns I: node I's mount namespace with its private kubelet paths.
make_mount_ns() {
  local i=$1 nd; nd=$(node_dir "$1")
  mkdir -p "$DIR/mnt"
  if ! mountpoint -q "$DIR/mnt"; then
    mount --bind "$DIR/mnt" "$DIR/mnt"
    mount --make-private "$DIR/mnt"   # unshare pins a namespace only outside shared mounts
  fi
  touch "$(mnt_pin "$i")"
  unshare --mount="$(mnt_pin "$i")" --propagation slave true
  local p
  for p in /var/lib/kubelet/device-plugins /var/log/pods /var/log/containers /run/netns; do
    local d=$p
    until [ -d "$d" ]; do echo "$d" >> "$DIR/created-dirs"; d=$(dirname "$d"); done
    mkdir -p "$p"
    mkdir -p "$nd/run/private$p"
    nsenter --mount="$(mnt_pin "$i")" -- mount --bind "$nd/run/private$p" "$p"
  done
}
# remove_mount_ns I: unpins it; the namespace (with every mount made in it)
# goes when its last process has gone.
remove_mount_ns() {
  umount "$(mnt_pin "$1")" 2>/dev/null || true
  rm -f "$(mnt_pin "$1")"
}
remove_mount_root() {
  umount "$DIR/mnt" 2>/dev/null || true
  rmdir "$DIR/mnt" 2>/dev/null || true
  local p
  if [ -f "$DIR/created-dirs" ]; then
    while read -r p; do rmdir "$p" 2>/dev/null || true; done < <(sort -ru "$DIR/created-dirs")
    rm -f "$DIR/created-dirs"
  fi
}
