#!/usr/bin/env bash
# Process, cgroup, container and tunable bookkeeping shared by the single real
# node (scripts/real-node.sh) and the multi-node cluster
# (scripts/real-cluster.sh); sourced, not run. Each caller sets RUN (its run
# directory: pid files and logs/), defines say() and die(), and calls these
# from one shell at a time (no locking).

# The kubelet sets these machine-wide tunables at start; `up` saves them,
# `down` puts them back.
TUNABLES=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
          kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
# Where each of the two scripts saves the machine's own values.
TUNABLES_SAVED_FILES=(/var/lib/khorovod-node/tunables.saved /var/lib/khorovod-cluster/tunables.saved)

# save_tunables FILE: the machine's own values. When the other script is up,
# its kubelets have already changed them: its saved copy holds the originals.
save_tunables() {
  local other k
  for other in "${TUNABLES_SAVED_FILES[@]}"; do
    [ "$other" != "$1" ] && [ -s "$other" ] && { cp "$other" "$1"; return 0; }
  done
  for k in "${TUNABLES[@]}"; do echo "$k=$(sysctl -n "$k")"; done > "$1"
}
restore_tunables() {  # FILE
  [ -f "$1" ] || return 0
  local kv
  while IFS= read -r kv; do sysctl -qw "$kv" 2>/dev/null || true; done < "$1"
  rm -f "$1"
}

# What a node needs from this machine; any gap stops `up` with its name.
preflight() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces, mounts, containers)"
  local t
  for t in containerd runc ip nsenter unshare iptables conntrack findmnt openssl; do
    command -v "$t" >/dev/null || die "missing $t (scripts/install-deps.sh installs it)"
  done
  for t in bridge host-local loopback portmap; do
    [ -x "/usr/lib/cni/$t" ] || die "missing CNI plugin /usr/lib/cni/$t (package containernetworking-plugins)"
  done
  grep -qw overlay /proc/filesystems || die "the kernel has no overlay filesystem (containerd's snapshotter needs it)"
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] \
    || die "the kernel has no br_netfilter (kube-proxy's Service rules must see bridged pod traffic)"
  [ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] || die "no memory cgroup controller mounted"
}

# A pid file holds the pid and the process's start time (field 22 of
# /proc/PID/stat), because RUN outlives a reboot or a snapshot of the machine:
# a bare pid from an earlier boot may now name an unrelated process (once, the
# test that was bringing the node up), and down must never signal that one.
pid_start_time() {  # pid: fails for a process that is gone or a zombie (dead, not yet reaped)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # the command name may hold spaces and parentheses
  awk '$1 == "Z" { exit 1 } { print $20 }' <<<"$stat"
}
record_pid() {  # name pid
  echo "$2 $(pid_start_time "$2")" > "$RUN/$1.pid"
}
live_pid() {  # name: prints the recorded pid if that very process still runs
  local pid started now
  read -r pid started 2>/dev/null < "$RUN/$1.pid" || return 1
  now=$(pid_start_time "$pid") || return 1
  [ -n "$started" ] && [ "$now" = "$started" ] && echo "$pid"
}
# start_logged NAME COMMAND...: in its own session, logs in RUN/logs/NAME.log.
start_logged() {
  local name=$1; shift
  setsid "$@" >> "$RUN/logs/$name.log" 2>&1 < /dev/null &
  record_pid "$name" $!
}
stop_pid() {  # name [signal]: TERM (or the signal), then KILL after 10 s
  local pid i
  pid=$(live_pid "$1") || { rm -f "$RUN/$1.pid"; return 0; }
  kill "-${2:-TERM}" "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do pid_start_time "$pid" >/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$RUN/$1.pid"
}

dump_logs() {
  local log
  for log in "$RUN"/logs/*.log; do [ -f "$log" ] && { echo "---- $log (last 25 lines)"; tail -25 "$log"; }; done >&2
}
wait_for() {  # description seconds command... : polls once a second
  local what=$1 secs=$2; shift 2
  local i
  for ((i = 0; i < secs; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  say "timed out after ${secs}s waiting for $what"; dump_logs; return 1
}

# make_cgroup_root NAME: the kubelet's cgroup root (cgroupRoot in its
# configuration) must exist in every hierarchy; a new cpuset cgroup starts
# without cpus/mems, so it takes its parent's.
make_cgroup_root() {
  local d
  for d in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [ -f "$d/cgroup.procs" ] || continue
    mkdir -p "$d/$1"
  done
  if [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus > "/sys/fs/cgroup/cpuset/$1/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems > "/sys/fs/cgroup/cpuset/$1/cpuset.mems"
  fi
}
# kill_cgroup NAME: SIGKILL every process under the cgroup root NAME (the
# containers a kubelet started there), as a machine's crash would.
kill_cgroup() {
  local f pid
  while IFS= read -r f; do
    while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done < "$f"
  done < <(find /sys/fs/cgroup/*/"$1" /sys/fs/cgroup/"$1" -name cgroup.procs 2>/dev/null)
}
remove_cgroups() {  # NAME
  local d
  for d in /sys/fs/cgroup/*/"$1" /sys/fs/cgroup/"$1"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# remove_containers SOCK: every container of that containerd, and the pod
# network namespaces its sandboxes hold (removed after the containers). Run
# it in the mount namespace that containerd runs in (its netns mounts are there).
remove_containers() {
  local sock=$1
  ctr --address "$sock" version >/dev/null 2>&1 || return 0
  local c netns_paths=()
  for c in $(ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
    local p
    p=$(ctr --address "$sock" -n k8s.io containers info "$c" 2>/dev/null \
        | python3 -c 'import json,sys; s=json.load(sys.stdin).get("Spec") or {}; print(next((n.get("path","") for n in s.get("linux",{}).get("namespaces",[]) if n.get("type")=="network"),""))' || true)
    case "$p" in /var/run/netns/cni-*|/run/netns/cni-*) netns_paths+=("$p") ;; esac
    ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
  done
  sleep 1
  for c in $(ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
    ctr --address "$sock" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
    ctr --address "$sock" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
  done
  for p in "${netns_paths[@]}"; do umount "$p" 2>/dev/null || true; rm -f "$p"; done
}

# kill_shims SOCK: containerd's shims outlive it; ours name our socket on
# their command line.
kill_shims() {
  local d pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    tr '\0' ' ' 2>/dev/null < "$d/cmdline" | grep -q -- "containerd-shim.* -address $1 " && kill -9 "$pid" 2>/dev/null
  done
  return 0
}

# unmount_under DIR: every mount below DIR, deepest first (volumes, rootfs, sandbox shm).
unmount_under() {
  local m
  for m in $(findmnt -rn -o TARGET | { grep -E "^$1/" || true; } | sort -r); do umount -l "$m" 2>/dev/null || true; done
}

# gpu_health ID healthy|unhealthy: marks a simulated GPU (GPU-sim-<i>; `all
# healthy` for every one) in GPU_HEALTH_FILE, which the device plugin polls.
gpu_health() {  # ID healthy|unhealthy
  local id=${1:-} state=${2:-}
  [ -f "$GPU_HEALTH_FILE" ] || die "no simulated GPUs (the node is down or has none)"
  if [ "$id" = all ] && [ "$state" = healthy ]; then : > "$GPU_HEALTH_FILE"; say "every GPU marked healthy"; return 0; fi
  [[ $id =~ ^GPU-sim-[0-9]+$ ]] || die "gpu-health: ID must be GPU-sim-<index> (or 'all' to mark every GPU healthy), not '$id'"
  local others; others=$(grep -vx -- "$id" "$GPU_HEALTH_FILE" || true)
  case "$state" in
    unhealthy) printf '%s\n' $others "$id" > "$GPU_HEALTH_FILE.new" ;;
    healthy) printf '%s\n' $others > "$GPU_HEALTH_FILE.new" ;;
    *) die "gpu-health: state must be healthy or unhealthy, not '$state'" ;;
  esac
  mv "$GPU_HEALTH_FILE.new" "$GPU_HEALTH_FILE"
  say "$id marked $state"
}
