#!/usr/bin/env bash
# Speed across simulated nodes: khorovod against Horovod 0.28.1 (Gloo) and
# torch DDP (gloo), and khorovod's hierarchical allreduce against the flat
# ring, over tc-limited links (docs/benchmarks.md; not run by tests).
#
#   bench/crossnode.sh up [RATE]   3 nodes, links at RATE (1gbit, 10gbit; [1gbit])
#   bench/crossnode.sh rate RATE   change every link's rate
#   bench/crossnode.sh sxs [side_by_side.py args]     bench/side_by_side.sh's
#       workloads and allreduces, launched across the nodes (khorovodrun -H
#       and horovodrun --gloo -H over ssh, each DDP rank over ssh), in
#       alternating blocks; --ranks is the ranks per node ([1,2])
#   bench/crossnode.sh synthetic [MODEL] [BATCH] [BLOCKS] [SLOTS]
#       Horovod's examples/pytorch/pytorch_synthetic_benchmark.py (v0.28.1)
#       under horovodrun and, its import changed to khorovod.torch, under
#       khorovodrun, alternating; img/sec per rank [mobilenet_v3_small 4 5 "1 2"]
#   bench/crossnode.sh hier [MIN_BYTES] [MAX_BYTES] [REPS] [SLOTS]
#       khorovod-bench-allreduce --mode backends (the hierarchical data plane,
#       shm, against the flat Gloo ring, alternating) and --mode sweep (the
#       whole runtime against raw Gloo's flat ring) at 3 nodes x SLOTS [2]
#   bench/crossnode.sh launch CMD...   CMD as the launchers run: on node 1,
#       ssh reaching the nodes (e.g. khorovodrun -H with KHOROVOD_TIMELINE)
#   bench/crossnode.sh down        everything `up` made, and every process in it
#
# The topology is scripts/real-node/cluster-net.sh's (the multi-node
# cluster's), made by its functions under this script's own names: a hub
# namespace khvb-cp holding a bridge, and nodes khvb-n1..n3 (10.252.0.11-13,
# eth0 each) linked to it by veth pairs limited with tc tbf in both
# directions. Nothing routes off the machine; the cluster's khvc-* names are
# left alone. Each node runs its own sshd (port 22 of its namespace, a key
# pair and host key made by `up` in $STATE); `ssh` on the launchers' PATH is
# a wrapper that uses them, so horovodrun and khorovodrun reach the nodes as
# they would real hosts. The launchers run in node 1's namespace, like a
# launcher on the first host.
#
# Needs root, sshd, Horovod's venv (scripts/horovod-wheel.sh), Debian's
# python3-torchvision (sxs and synthetic; installed when missing) and Horovod's example at
# $HOROVOD_EXAMPLE [~/.cache/khorovod/horovod-examples/0.28.1/
# pytorch_synthetic_benchmark.py], the file of that name in Horovod's
# repository at tag v0.28.1 (not in its PyPI sdist). Builds khorovod's
# Release build in build/sxs like bench/side_by_side.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
STATE=${CROSSNODE_STATE:-/tmp/khvb}
NET_NAME_PREFIX=khvb
CP_NS=khvb-cp
NODES=3
NODE_NET_PREFIX=10.252.0
API_IP=$NODE_NET_PREFIX.1
# Unused by the benchmark, but cluster-net.sh routes them: ranges of their own.
POD_NET_PREFIX=10.247
SVC_CIDR=10.253.0.0/16
# shellcheck source=../scripts/real-node/cluster-net.sh
. "$root/scripts/real-node/cluster-net.sh"

die() { echo "crossnode: $*" >&2; exit 1; }
hosts_at() { local i out=""; for ((i = 1; i <= NODES; i++)); do out+="${out:+,}$(node_ip "$i"):$1"; done; echo "$out"; }
host_addrs() { local i out=""; for ((i = 1; i <= NODES; i++)); do out+="${out:+,}$(node_ip "$i")"; done; echo "$out"; }
# as_node I CMD...: CMD as on node I: in its network namespace, and in UTS
# and mount namespaces of its own where the host name is the node's and
# /etc/hosts (a bind mount of $STATE/hosts-n<I>) resolves it to the node's
# address, as on a real host. (Horovod 0.28.1 connects its process sets'
# Gloo contexts at the address the host name resolves to, not at
# --network-interface's: with the machine's name, 127.0.0.1.)
as_node() {
  local i=$1; shift
  ip netns exec "$(node_ns "$i")" unshare --uts --mount --propagation private \
    sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"' \
    as_node "$(node_name "$i")" "$STATE/hosts-n$i" "$@"
}
# in_launcher CMD...: as on node 1, with the ssh wrapper first on PATH.
in_launcher() { as_node 1 env PATH="$STATE/bin:$PATH" "$@"; }

start_sshd() {
  local i=$1
  cat >"$STATE/sshd-n$i.conf" <<EOF
ListenAddress $(node_ip "$i")
HostKey $STATE/host_key
AuthorizedKeysFile $STATE/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100
PidFile $STATE/sshd-n$i.pid
EOF
  printf '127.0.0.1 localhost\n%s %s\n' "$(node_ip "$i")" "$(node_name "$i")" >"$STATE/hosts-n$i"
  as_node "$i" /usr/sbin/sshd -f "$STATE/sshd-n$i.conf" -E "$STATE/sshd-n$i.log"
}

up() {
  local rate=${1:-1gbit}
  valid_rate "$rate" || die "bad rate $rate (e.g. 1gbit, 10gbit)"
  [ ! -e "/run/netns/$CP_NS" ] || die "already up (bench/crossnode.sh down first)"
  LINK_RATE=$rate
  mkdir -p "$STATE/bin" /run/sshd
  chmod 700 "$STATE"
  make_cp_netns
  local i
  for ((i = 1; i <= NODES; i++)); do make_node_netns "$i"; done
  rm -f "$STATE"/id "$STATE"/id.pub "$STATE"/host_key "$STATE"/host_key.pub "$STATE"/known_hosts
  ssh-keygen -q -t ed25519 -N '' -f "$STATE/id" -C khorovod-crossnode
  ssh-keygen -q -t ed25519 -N '' -f "$STATE/host_key" -C khorovod-crossnode-host
  cp "$STATE/id.pub" "$STATE/authorized_keys"
  cat >"$STATE/ssh_config" <<EOF
Host *
  User root
  IdentityFile $STATE/id
  IdentitiesOnly yes
  UserKnownHostsFile $STATE/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking no
  LogLevel ERROR
EOF
  printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$STATE/ssh_config" >"$STATE/bin/ssh"
  chmod +x "$STATE/bin/ssh"
  for ((i = 1; i <= NODES; i++)); do start_sshd "$i"; done
  for ((i = 1; i <= NODES; i++)); do
    local tries=0
    until in_launcher timeout 5 ssh "$(node_ip "$i")" true 2>/dev/null; do
      ((++tries < 50)) || die "sshd of node $i does not answer (log: $STATE/sshd-n$i.log)"
      sleep 0.2
    done
  done
  echo "crossnode: up, $NODES nodes at $rate ($(host_addrs))"
}

down() {
  local i ns pid
  for ((i = 1; i <= NODES; i++)); do
    ns=$(node_ns "$i")
    [ -e "/run/netns/$ns" ] || continue
    # Only processes inside this script's namespaces: its sshds and workers.
    for pid in $(ip netns pids "$ns"); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns"
  done
  [ ! -e "/run/netns/$CP_NS" ] || ip netns del "$CP_NS"
  rm -rf "$STATE"
  echo "crossnode: down"
}

set_rate() {
  valid_rate "${1:-}" || die "bad rate ${1:-} (e.g. 1gbit, 10gbit)"
  local i
  for ((i = 1; i <= NODES; i++)); do set_link_rate "$i" "$1"; done
}

link_rate() { ip netns exec "$(node_ns 1)" tc qdisc show dev eth0 | sed -n 's/.* rate \([^ ]*\) .*/\1/p'; }

build() {
  [ -e "/run/netns/$CP_NS" ] || die "not up (bench/crossnode.sh up first)"
  nice -n 5 "$root/scripts/build.sh" sxs -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
    -DKHOROVOD_WITH_NCCL=OFF -- khorovod_python khorovodrun khorovod-bench-allreduce >/dev/null
}

# torchvision's models (the mobilenet step, Horovod's example), for this
# benchmark only (not in install-deps.sh). Checked with Debian's
# interpreter, the one the workers run (a python3 earlier on PATH, e.g.
# pyenv's, never sees Debian's package).
need_torchvision() {
  /usr/bin/python3 -c 'import torchvision' 2>/dev/null ||
    DEBIAN_FRONTEND=noninteractive flock /tmp/apt.lock apt-get install -y -qq python3-torchvision >/dev/null ||
    die "python3-torchvision could not be installed"
}

# wants_horovod ARGS...: whether side_by_side.py's --frameworks (default:
# all three) includes Horovod, whose venv takes a long build the first time.
wants_horovod() {
  local frameworks=khorovod,horovod,ddp
  while [ $# -gt 0 ]; do
    case $1 in
      --frameworks) frameworks=${2:-}; shift ;;
      --frameworks=*) frameworks=${1#--frameworks=} ;;
    esac
    shift
  done
  [[ ,$frameworks, == *,horovod,* ]]
}

sxs() {
  need_torchvision
  build
  local hvd_python=""
  if wants_horovod "$@"; then hvd_python=$("$root/scripts/horovod-wheel.sh" | tail -1); fi
  echo "# links $(link_rate) per direction, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  in_launcher python3 "$root/bench/python/side_by_side.py" \
    --khorovodrun "$root/build/sxs/bin/khorovodrun" --khorovod-pythonpath "$root/build/sxs/python" \
    --horovod-python "$hvd_python" --host-addrs "$(host_addrs)" --interface eth0 \
    --ranks 1,2 "$@"
}

synthetic() {
  local model=${1:-mobilenet_v3_small} batch=${2:-4} blocks=${3:-5} slots=${4:-"1 2"}
  local example=${HOROVOD_EXAMPLE:-$HOME/.cache/khorovod/horovod-examples/0.28.1/pytorch_synthetic_benchmark.py}
  [ -f "$example" ] || die "no $example (Horovod's examples/pytorch/pytorch_synthetic_benchmark.py at v0.28.1)"
  need_torchvision
  build
  local hvd_python; hvd_python=$("$root/scripts/horovod-wheel.sh" | tail -1)
  # The documented migration (docs/python.md): only the import changes.
  sed 's/^import horovod\.torch as hvd$/import khorovod.torch as hvd/' "$example" >"$STATE/synthetic_khorovod.py"
  grep -q '^import khorovod.torch as hvd$' "$STATE/synthetic_khorovod.py" || die "$example: no 'import horovod.torch as hvd' line"
  echo "# links $(link_rate) per direction, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  in_launcher python3 "$root/bench/python/crossnode_synthetic.py" \
    --khorovodrun "$root/build/sxs/bin/khorovodrun" --khorovod-pythonpath "$root/build/sxs/python" \
    --horovod-python "$hvd_python" --host-addrs "$(host_addrs)" --interface eth0 \
    --horovod-script "$example" --khorovod-script "$STATE/synthetic_khorovod.py" \
    --model "$model" --batch-size "$batch" --blocks "$blocks" --slots "${slots// /,}"
}

hier() {
  local min=${1:-65536} max=${2:-67108864} reps=${3:-5} slots=${4:-2} mode
  build
  for mode in backends sweep; do
    echo "## $NODES nodes x $slots ranks, links $(link_rate) per direction, --mode $mode, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
    # backends: the runtime itself stays on gloo and the bench times both
    # data planes; sweep: the runtime on shm (hierarchical where it pays).
    local ops=gloo; [ "$mode" = backends ] || ops=shm
    in_launcher env KHOROVOD_TIMEOUT_SECONDS=120 KHOROVOD_CPU_OPERATIONS=$ops timeout 900 \
      "$root/build/sxs/bin/khorovodrun" -np $((NODES * slots)) -H "$(hosts_at "$slots")" \
      "$root/build/sxs/bin/khorovod-bench-allreduce" --mode "$mode" --min-bytes "$min" \
      --max-bytes "$max" --reps "$reps"
  done
}

[ "$(id -u)" -eq 0 ] || die "needs root (ip netns, tc, sshd)"
cmd=${1:-}; shift || true
case $cmd in
  up) up "$@" ;;
  down) down ;;
  rate) set_rate "$@" ;;
  sxs) sxs "$@" ;;
  synthetic) synthetic "$@" ;;
  hier) hier "$@" ;;
  launch)
    [ -e "/run/netns/$CP_NS" ] || die "not up (bench/crossnode.sh up first)"
    [ $# -gt 0 ] || die "launch needs a command"
    in_launcher "$@" ;;
  *) die "usage: bench/crossnode.sh up [RATE] | rate RATE | sxs [args] | synthetic [MODEL BATCH BLOCKS SLOTS] | hier [MIN MAX REPS SLOTS] | launch CMD... | down" ;;
esac
