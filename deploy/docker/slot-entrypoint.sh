#!/bin/bash
# Worker pod entrypoint: runs the training command once per slot
# (KHOROVOD_SLOTS, from the HorovodJob's slotsPerWorker). Each process gets a
# distinct KHOROVOD_WORKER_NAME (<pod>-<slot>); they share the pod's address,
# so the rendezvous gives them consecutive local ranks, and the runtime pins
# GPU <local_rank>. The pod exits with the first non-zero status as soon as
# any slot exits non-zero (the other slots are stopped: an elastic survivor
# would otherwise train on and the pod would hide the failure); it exits 0
# only when every slot did. SIGTERM and SIGINT are forwarded to every slot.
set -u
slots=${KHOROVOD_SLOTS:-1}
[ "$slots" -le 1 ] && exec "$@"
declare -A running=()
for i in $(seq 0 $((slots - 1))); do
  # Each slot serves its metrics on its own port: base + slot.
  port=${KHOROVOD_METRICS_PORT:-0}; [ "$port" -gt 0 ] && port=$((port + i))
  KHOROVOD_WORKER_NAME="${KHOROVOD_WORKER_NAME:-worker}-$i" KHOROVOD_METRICS_PORT=$port "$@" &
  running[$!]=$i
done
stop_all() { [ ${#running[@]} -gt 0 ] && kill -TERM "${!running[@]}" 2>/dev/null; }
trap stop_all TERM INT
status=0
while [ ${#running[@]} -gt 0 ]; do
  finished=""
  wait -n -p finished "${!running[@]}"
  rc=$?
  # No pid: a forwarded signal interrupted the wait; keep waiting for the slots.
  [ -n "$finished" ] || continue
  unset "running[$finished]"
  if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
    echo "khorovod-slots: a slot exited with status $rc; stopping the others" >&2
    status=$rc
    stop_all
  fi
done
exit $status
