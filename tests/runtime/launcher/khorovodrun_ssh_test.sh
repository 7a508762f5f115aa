#!/usr/bin/env bash
# khorovodrun on remote hosts over ssh, end to end, on hosts simulated by
# network namespaces.
#
#   khorovodrun_ssh_test.sh KHOROVODRUN WORKER SCENARIO
#   SCENARIO: static | elastic | ssh-dies | discovery | unreachable | wrong-identity
#
# Each run creates its own namespaces: a bridge namespace (<p>-br, bridge
# br0, no address), the launcher's (<p>-l, eth0 10.98.0.1) and one per
# simulated host (<p>-h1 10.98.0.11, <p>-h2 10.98.0.12, each eth0), joined
# to the bridge by veth pairs. Each host runs a real sshd (its own config,
# host key and authorized key in a temp dir, listening on port 2222 of its
# address only), reached with a throwaway key pair made per run. The
# addresses exist only inside these namespaces; nothing routes off the
# machine. khorovodrun runs in the launcher's namespace with HOME and ssh's
# known-hosts file in the temp dir (KHOROVOD_SSH is a wrapper adding
# `-F <temp config>`), so nothing outside the temp dir is touched except
# /run/sshd, sshd's privilege-separation directory. Everything created is
# removed on exit; every wait is bounded.
#
# Needs root (ip netns, sshd); exits 77 (ctest's skip) with the reason
# otherwise, or without sshd.
set -euo pipefail
khorovodrun=$(realpath "$1") worker=$(realpath "$2") scenario=$3

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, sshd)"
[ -x /usr/sbin/sshd ] || skip "no /usr/sbin/sshd (Debian openssh-server; scripts/install-deps.sh)"
command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || skip "no ssh client (openssh-client)"
command -v ip >/dev/null || skip "no ip (iproute2)"

id=$(( $$ % 100000 ))
p=khssh$id
net=10.98.0
tmp=$(mktemp -d /tmp/khorovod-ssh-test-XXXXXX)
pids=()
namespaces=()

cleanup() {
  set +e
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null; done
  for ns in "${namespaces[@]}"; do ip netns delete "$ns" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*"
  for log in "$tmp"/sshd-*.log; do [ -s "$log" ] && { echo "--- $log"; tail -20 "$log"; }; done
  exit 1
}

add_namespace() {
  ip netns add "$1"
  namespaces+=("$1")
  ip -n "$1" link set lo up
}

# join NAMESPACE ADDRESS: a veth from NAMESPACE's eth0 to the bridge.
join() {
  local ns=$1 address=$2 outside=k${id}${1##*-}
  ip link add "$outside" type veth peer name "${outside}i"
  ip link set "$outside" netns "$p-br"
  ip link set "${outside}i" netns "$ns"
  ip -n "$ns" link set "${outside}i" name eth0
  ip -n "$ns" addr add "$address/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$p-br" link set "$outside" master br0 up
}

start_sshd() {
  local ns=$1 address=$2
  cat >"$tmp/sshd-$ns.conf" <<EOF
Port 2222
ListenAddress $address
HostKey $tmp/host_key
AuthorizedKeysFile $tmp/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
EOF
  ip netns exec "$ns" /usr/sbin/sshd -D -f "$tmp/sshd-$ns.conf" -E "$tmp/sshd-$ns.log" &
  pids+=($!)
}

# wait_for_port NAMESPACE ADDRESS: sshd answers (at most 10 s).
wait_for_port() {
  for _ in $(seq 100); do
    ip netns exec "$p-l" timeout 1 bash -c "exec 3<>/dev/tcp/$2/2222" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "sshd in $1 did not listen on $2:2222"
}

add_namespace "$p-br"
ip -n "$p-br" link add br0 type bridge
ip -n "$p-br" link set br0 up
add_namespace "$p-l"
join "$p-l" "$net.1"
for h in 1 2; do
  add_namespace "$p-h$h"
  join "$p-h$h" "$net.1$h"
done

ssh-keygen -q -t ed25519 -N '' -f "$tmp/id" -C khorovod-ssh-test
ssh-keygen -q -t ed25519 -N '' -f "$tmp/wrong" -C khorovod-ssh-test-wrong
ssh-keygen -q -t ed25519 -N '' -f "$tmp/host_key" -C khorovod-ssh-test-host
cp "$tmp/id.pub" "$tmp/authorized_keys"
mkdir -p /run/sshd
chmod 700 "$tmp"
sshd_pid=()
for h in 1 2; do start_sshd "$p-h$h" "$net.1$h"; sshd_pid[$h]=$!; done
for h in 1 2; do wait_for_port "$p-h$h" "$net.1$h"; done

cat >"$tmp/ssh_config" <<EOF
Host *
  User root
  UserKnownHostsFile $tmp/known_hosts
  GlobalKnownHostsFile /dev/null
  IdentitiesOnly yes
EOF
printf '#!/bin/sh\nexec ssh -F %s "$@"\n' "$tmp/ssh_config" >"$tmp/ssh"
chmod +x "$tmp/ssh"

# run SECONDS ARGS...: khorovodrun in the launcher's namespace; sets $out, $rc.
run() {
  local seconds=$1; shift
  set +e
  out=$(cd "$tmp" && ip netns exec "$p-l" env HOME="$tmp" KHOROVOD_SSH="$tmp/ssh" SSH_TEST_MARK=exported \
        timeout -k 5 "$seconds" "$khorovodrun" "$@" 2>&1)
  rc=$?
  set -e
  echo "$out"
  echo "(khorovodrun exit code $rc)"
}

# start_job ARGS...: khorovodrun in the background (output in $tmp/job.log).
start_job() {
  (cd "$tmp" && ip netns exec "$p-l" env HOME="$tmp" KHOROVOD_SSH="$tmp/ssh" timeout -k 5 150 "$khorovodrun" \
      "$@" >"$tmp/job.log" 2>&1; echo $? >"$tmp/job.rc") &
  job=$!
  pids+=("$job")
}

# workers_on_host2: once 4 elastic workers run (at most 60 s), the pids of
# those in host 2's namespace, in $on_host2 (exactly 2, or the test fails).
workers_on_host2() {
  for _ in $(seq 600); do [ "$(pgrep -fc "^$worker elastic")" -ge 4 ] && break; sleep 0.1; done
  sleep 1
  on_host2=()
  for pid in $(pgrep -f "^$worker elastic"); do
    [ "$(ip netns identify "$pid" 2>/dev/null)" = "$p-h2" ] && on_host2+=("$pid")
  done
  [ ${#on_host2[@]} -eq 2 ] || fail "expected 2 workers in host 2's namespace, found ${#on_host2[@]}"
}

# host2_workers_end SECONDS WHY: each of $on_host2 ends within SECONDS.
host2_workers_end() {
  for pid in "${on_host2[@]}"; do
    timeout "$1" tail --pid="$pid" -f /dev/null || fail "worker $pid on host 2 still runs $1 s after $2"
  done
}

# finish_job: waits for start_job's khorovodrun; sets $out and $rc; host 1's
# two workers must have finished 300 steps as a world of 2.
finish_job() {
  timeout 150 tail --pid="$job" -f /dev/null || true
  out=$(cat "$tmp/job.log"); rc=$(cat "$tmp/job.rc" 2>/dev/null || echo none)
  echo "$out"; echo "(khorovodrun exit code $rc)"
  [ "$rc" = 0 ] || fail "khorovodrun exited $rc"
  [ "$(grep -c "finished: rank [01] of 2 on $net.11 after 300 steps" <<<"$out")" -eq 2 ] \
    || fail "the two workers of host 1 must finish as a world of 2"
}

hosts="$net.11:2,$net.12:2"
case $scenario in
static)
  run 90 -np 4 -H "$hosts" -p 2222 -i "$tmp/id" --network-interface eth0 --start-timeout 20 "$worker" static
  [ $rc -eq 0 ] || fail "khorovodrun exited $rc"
  for r in 0 1 2 3; do
    local_rank=$((r % 2)) cross=$((r / 2)) host=$net.1$((r / 2 + 1))
    grep -q "placement rank=$r size=4 local_rank=$local_rank cross_rank=$cross HOROVOD_RANK=$r \
HOROVOD_LOCAL_RANK=$local_rank HOROVOD_CROSS_RANK=$cross HOROVOD_HOSTNAME=$host netns=$host \
SSH_TEST_MARK=exported cwd=$tmp token_on_cmdlines=0" <<<"$out" || fail "rank $r: wrong placement line"
    grep -q "rank $r allreduce exact" <<<"$out" || fail "rank $r: no exact allreduce"
  done
  [ "$(grep -c "$net.1[12]" "$tmp/.khorovod/ssh-checks" 2>/dev/null)" -eq 2 ] \
    || fail "the ssh checks of both hosts were not cached in \$HOME/.khorovod/ssh-checks"
  # This machine (by its address) and a remote host in one job, without the cache.
  rm -f "$tmp/.khorovod/ssh-checks"
  run 60 -np 3 -H "$net.1:1,$net.11:2" -p 2222 -i "$tmp/id" --disable-cache "$worker" static
  [ $rc -eq 0 ] || fail "khorovodrun --disable-cache exited $rc"
  grep -q "placement rank=0 size=3 local_rank=0 cross_rank=0 HOROVOD_RANK=0 HOROVOD_LOCAL_RANK=0 \
HOROVOD_CROSS_RANK=0 HOROVOD_HOSTNAME=$net.1 netns=$net.1 " <<<"$out" || fail "the local rank 0 is misplaced"
  for r in 1 2; do
    grep -q "placement rank=$r size=3 local_rank=$((r - 1)) cross_rank=1 .* netns=$net.11 " <<<"$out" \
      || fail "rank $r is misplaced"
  done
  [ "$(grep -c "allreduce exact" <<<"$out")" -eq 3 ] || fail "a rank of the mixed job missed the exact allreduce"
  [ ! -e "$tmp/.khorovod/ssh-checks" ] || fail "--disable-cache wrote the cache"
  echo "PASS: 2 hosts x 2 slots over ssh: placements, Horovod's variables and exact allreduce on every rank;" \
       "a job mixing this machine and a remote host; the check cache and --disable-cache"
  ;;
elastic)
  start=$SECONDS
  run 150 -np 4 --min-np 2 --max-np 4 -H "$hosts" -p 2222 -i "$tmp/id" --start-timeout 20 \
      "$worker" elastic 150 "$net.12" 20
  [ $rc -eq 0 ] || fail "khorovodrun exited $rc"
  # Both of host 2's workers commit step 20 and die; the second may instead be
  # stopped by the blacklisting of its host, whichever comes first.
  grep -q "worker on $net.12: SIGKILL at step 20" <<<"$out" || fail "host 2's workers did not die"
  grep -q "host $net.12 blacklisted" <<<"$out" || fail "host 2 was not blacklisted"
  [ "$(grep -c "finished: rank [01] of 2 on $net.11 after 150 steps" <<<"$out")" -eq 2 ] \
    || fail "the two workers of host 1 must finish as a world of 2"
  grep -q "starting worker .* on $net.12" <<<"$out" && fail "a worker was started on the blacklisted host"
  left=$(pgrep -f "^$worker elastic" || true)
  [ -z "$left" ] || fail "worker processes left behind: $left"
  echo "PASS: host 2's workers SIGKILLed at step 20; host blacklisted; host 1 re-formed and finished in $((SECONDS - start)) s"
  ;;
ssh-dies)
  # Host 2's sshd and its sessions are killed mid-job (the workers' shells
  # and the workers themselves are left alone): ssh's end of each session
  # closes, so khorovodrun sees the workers fail, and on the host the
  # session's closed stdin makes the watcher terminate the worker.
  start_job -np 4 --min-np 2 --max-np 4 -H "$hosts" -p 2222 -i "$tmp/id" "$worker" elastic 300 none 0
  workers_on_host2
  sessions=$(ps -o pid= --ppid "${sshd_pid[2]}" | tr '\n' ' ')
  [ -n "$sessions" ] || fail "no ssh sessions on host 2"
  kill "${sshd_pid[2]}" $sessions
  host2_workers_end 10 "their ssh sessions died"
  finish_job
  grep -q "host $net.12 blacklisted" <<<"$out" || fail "host 2 was not blacklisted"
  echo "PASS: host 2's sshd died mid-job; its workers failed and were terminated there, host 1 finished"
  ;;
discovery)
  # --host-discovery-script lists both remote hosts, then only host 1: host
  # 2's workers are stopped through their ssh sessions and must end there.
  printf '%s\n' "$net.11:2" "$net.12:2" >"$tmp/hosts"
  printf '#!/bin/sh\ncat %s\n' "$tmp/hosts" >"$tmp/discover.sh"
  chmod +x "$tmp/discover.sh"
  start_job -np 4 --min-np 2 --max-np 4 --host-discovery-script "$tmp/discover.sh" -p 2222 -i "$tmp/id" \
      "$worker" elastic 300 none 0
  workers_on_host2
  printf '%s\n' "$net.11:2" >"$tmp/hosts"
  host2_workers_end 15 "host 2 left the discovery output"
  finish_job
  grep -q "host $net.12 is gone or has fewer slots; stopping worker" <<<"$out" || fail "host 2's workers were not stopped"
  echo "PASS: discovered remote hosts ran workers; removing host 2 stopped its workers there; host 1 finished"
  ;;
unreachable)
  add_namespace "$p-h3"
  join "$p-h3" "$net.13"
  # Accepts TCP connections but never speaks ssh: the check can only time out.
  ip netns exec "$p-h3" python3 -c "
import socket, time
s = socket.socket(); s.bind(('$net.13', 2222)); s.listen(16); time.sleep(120)" &
  pids+=($!)
  wait_for_port "$p-h3" "$net.13"
  start=$SECONDS
  run 60 -np 4 -H "$net.11:2,$net.13:2" -p 2222 -i "$tmp/id" --start-timeout 4 "$worker" static
  took=$((SECONDS - start))
  [ $rc -eq 2 ] || fail "expected exit 2, got $rc"
  # Either the launcher's deadline ends the check (horovodrun's timeout
  # wording), or ssh's own connect timeout, sized to the same deadline, ends
  # an attempt a moment before it (horovodrun's failed-ssh wording, with
  # ssh's reason): which one wins is a race on a loaded machine.
  grep -q "Timed out waiting for ssh to $net.13\. Please check connectivity between servers\. You may need to \
increase the --start-timeout parameter" <<<"$out" \
    || { grep -q "ssh not successful for host $net.13:" <<<"$out" && grep -qi "timed out" <<<"$out" \
         && grep -q "could not connect to some hosts via ssh" <<<"$out"; } \
    || fail "no horovodrun-style timeout or failed-ssh message"
  [ $took -le 8 ] || fail "took $took s with --start-timeout 4"
  grep -q "placement" <<<"$out" && fail "a worker started"
  echo "PASS: the unreachable host was refused after $took s (--start-timeout 4)"
  ;;
wrong-identity)
  run 60 -np 4 -H "$hosts" -p 2222 -i "$tmp/wrong" --start-timeout 20 "$worker" static
  [ $rc -eq 2 ] || fail "expected exit 2, got $rc"
  grep -q "ssh not successful for host $net.11:" <<<"$out" || fail "no 'ssh not successful for host'"
  grep -q "Permission denied" <<<"$out" || fail "ssh's own reason is missing"
  grep -q "khorovodrun: could not connect to some hosts via ssh" <<<"$out" || fail "no final refusal"
  run 30 -np 4 -H "$hosts" -i "$tmp/no-such-key" "$worker" static
  [ $rc -eq 2 ] && grep -q -- "--ssh-identity-file $tmp/no-such-key: cannot read it" <<<"$out" \
    || fail "a missing identity file must be refused"
  # An interface no host has is refused, naming what each host has.
  run 30 -np 4 -H "$hosts" -p 2222 -i "$tmp/id" --network-interfaces wlan9,ib7 "$worker" static
  [ $rc -eq 2 ] && grep -q -- "--network-interfaces wlan9,ib7: no common interface among the job's hosts" <<<"$out" \
    && grep -q "$net.12: eth0 lo" <<<"$out" || fail "an interface no host has must be refused"
  echo "PASS: a wrong identity file is refused with ssh's reason; so are a missing key file and an absent interface"
  ;;
*) echo "unknown scenario $scenario"; exit 2 ;;
esac
