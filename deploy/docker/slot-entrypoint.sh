#!/bin/sh
# Worker pod entrypoint: runs the training command once per slot
# (KHOROVOD_SLOTS, from the HorovodJob's slotsPerWorker). Each process gets a
# distinct KHOROVOD_WORKER_NAME (<pod>-<slot>); they share the pod's address,
# so the rendezvous gives them consecutive local ranks, and the runtime pins
# GPU <local_rank>. The pod exits with the first non-zero status, after
# stopping the other slots; SIGTERM is forwarded to every slot.
set -u
slots=${KHOROVOD_SLOTS:-1}
[ "$slots" -le 1 ] && exec "$@"
pids=""
for i in $(seq 0 $((slots - 1))); do
  # Each slot serves its metrics on its own port: base + slot.
  port=${KHOROVOD_METRICS_PORT:-0}; [ "$port" -gt 0 ] && port=$((port + i))
  KHOROVOD_WORKER_NAME="${KHOROVOD_WORKER_NAME:-worker}-$i" KHOROVOD_METRICS_PORT=$port "$@" &
  pids="$pids $!"
done
trap 'kill -TERM $pids 2>/dev/null' TERM INT
status=0
for pid in $pids; do
  wait "$pid" || { [ $status -eq 0 ] && status=$? && kill -TERM $pids 2>/dev/null; }
done
exit $status
