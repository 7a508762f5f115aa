#!/usr/bin/env bash
# Hierarchical (shm) against flat (gloo) allreduce on simulated hosts.
#
#   sudo bench/hierarchical_netns.sh BIN_DIR [HOSTS] [RANKS_PER_HOST] [RATES] [MIN_BYTES] [MAX_BYTES] [REPS]
#   e.g. bench/hierarchical_netns.sh build/ci/bin 2 2 "1gbit 10gbit"
#
# Each simulated host is a network namespace (kh-hier-h<N>) whose one
# interface is a veth pair joined to a bridge (kh-hier-br) that this script
# creates; the ranks of a host run in its namespace and talk to each other
# over its loopback and /dev/shm, to other hosts over the veth. Every host's
# egress is limited with tc tbf to each rate in RATES in turn (this kernel
# has no sch_netem, so no added delay). The addresses (10.231.77.0/24) exist
# only inside those namespaces: the bridge has none and nothing routes off
# the machine. Everything the script creates is removed on exit, and it
# touches nothing else.
#
# BIN_DIR holds khorovod-bench-allreduce; its --mode backends times the two
# data planes KHOROVOD_CPU_OPERATIONS chooses between (gloo and shm) in
# alternating blocks within one run, per size. Rank r sits on host
# r / RANKS_PER_HOST (host-major: the flat ring crosses each link once per
# direction). Needs root (ip netns, tc).
#
# MODE=sweep runs the whole runtime instead (--mode sweep: khorovod's
# allreduce, negotiation included, against raw gloo::allreduce, the flat
# ring, in alternating blocks), with the runtime's host backend from
# CPU_OPERATIONS (default shm).
set -euo pipefail
mode=${MODE:-backends}; cpu_operations=${CPU_OPERATIONS:-shm}
bin=$(cd "${1:?BIN_DIR}" && pwd)/khorovod-bench-allreduce
hosts=${2:-2}; per_host=${3:-2}; rates=${4:-"1gbit 10gbit"}
min_bytes=${5:-65536}; max_bytes=${6:-67108864}; reps=${7:-3}
[ -x "$bin" ] || { echo "no $bin" >&2; exit 2; }
size=$((hosts * per_host))
prefix=kh-hier
bridge=$prefix-br
work=$(mktemp -d /tmp/kh-hier-XXXXXX)
pids=()

# Removes this script's namespaces, veth pairs (deleting the bridge side
# deletes both ends at once; a namespace's deletion would do it later) and
# bridge, and those an interrupted run of it left (same names).
remove_topology() {
  for ((h = 0; h < hosts; h++)); do
    ip link del "$prefix-v$h" 2>/dev/null || true
    ip netns del "$prefix-h$h" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
}
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  remove_topology
  rm -rf "$work"
}
trap cleanup EXIT
remove_topology

ip link add "$bridge" type bridge
ip link set "$bridge" up
for ((h = 0; h < hosts; h++)); do
  ns=$prefix-h$h
  ip netns add "$ns"
  ip link add "$prefix-v$h" type veth peer name "$prefix-p$h"
  ip link set "$prefix-v$h" master "$bridge" up
  ip link set "$prefix-p$h" netns "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$prefix-p$h" name eth0
  ip -n "$ns" addr add "10.231.77.$((h + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
done

# burst: enough for a GSO packet and a few timer ticks, small next to the
# smallest message so that a full bucket does not hide the rate.
burst_of() {
  case $1 in
    1gbit) echo 256kb ;;
    10gbit) echo 2mb ;;
    *) echo 1mb ;;
  esac
}

# In backends mode the runtime itself stays on gloo, so the bench's check
# for a mapped segment tells whether its shm backend really used one.
runtime_backend=gloo
[ "$mode" = backends ] || runtime_backend=$cpu_operations

run_rate() {
  local rate=$1 store=$work/store-$1 r h l
  mkdir -p "$store"
  for ((h = 0; h < hosts; h++)); do
    ip netns exec "$prefix-h$h" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$(burst_of "$rate")" latency 50ms
  done
  pids=()
  for ((r = 0; r < size; r++)); do
    h=$((r / per_host)); l=$((r % per_host))
    ip netns exec "$prefix-h$h" env KHOROVOD_RANK=$r KHOROVOD_SIZE=$size \
      KHOROVOD_LOCAL_RANK=$l KHOROVOD_LOCAL_SIZE=$per_host KHOROVOD_CROSS_RANK=$h KHOROVOD_CROSS_SIZE=$hosts \
      KHOROVOD_HOSTNAME=10.231.77.$((h + 1)) KHOROVOD_STORE_PATH="$store" KHOROVOD_JOB_ID=hier-$rate \
      KHOROVOD_CPU_OPERATIONS=$runtime_backend KHOROVOD_TIMEOUT_SECONDS=120 \
      timeout 900 "$bin" --mode "$mode" --min-bytes "$min_bytes" --max-bytes "$max_bytes" --reps "$reps" \
      >"$work/rank$r.$rate.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  pids=()
  echo "## $hosts hosts x $per_host ranks, tbf $rate per host (egress), mode $mode, runtime backend $runtime_backend, $(date -u +%FT%TZ)"
  cat "$work/rank0.$rate.log"
  if [ $failed -ne 0 ]; then
    for ((r = 1; r < size; r++)); do echo "--- rank $r"; tail -5 "$work/rank$r.$rate.log"; done
    echo "hierarchical_netns: a rank failed at $rate" >&2
    return 1
  fi
}

for rate in $rates; do run_rate "$rate"; done
