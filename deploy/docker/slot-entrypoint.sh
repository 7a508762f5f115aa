#!/bin/bash
# Worker pod entrypoint: runs the training command once per slot
# (KHOROVOD_SLOTS, from the HorovodJob's slotsPerWorker). Each process gets a
# distinct KHOROVOD_WORKER_NAME (<pod>-<slot>); they share the pod's address,
# so the rendezvous gives them consecutive local ranks; each declares its
# slot (KHOROVOD_LOCAL_SLOT=i), which makes slot i local rank i, as Horovod
# ranks a host's slots.
# GPUs: the device plugin hands the container its devices in
# NVIDIA_VISIBLE_DEVICES (IDs or UUIDs, comma-separated). Slot i sees only the
# i-th: CUDA_VISIBLE_DEVICES is that device's UUID, or the container-local
# index i where the list holds indices (NVIDIA's runtime renumbers the
# container's devices from 0); the runtime then uses device local_rank %
# visible devices = 0. Without a device list (none, void, all, unset) it
# leaves CUDA_VISIBLE_DEVICES alone. More slots than devices is an error
# (exit 2). KHOROVOD_GPU_ERROR_EXIT_CODE (default 121) is the status a
# training program exits with when its GPU fails: the operator then replaces
# the worker and keeps the job off that node for a while. The pod exits with the first non-zero status as soon as
# any slot exits non-zero (the other slots are stopped: an elastic survivor
# would otherwise train on and the pod would hide the failure); it exits 0
# only when every slot did. SIGTERM and SIGINT are forwarded to every slot.
set -u
slots=${KHOROVOD_SLOTS:-1}
export KHOROVOD_GPU_ERROR_EXIT_CODE=${KHOROVOD_GPU_ERROR_EXIT_CODE:-121}
devices=()
case "${NVIDIA_VISIBLE_DEVICES:-}" in
  ""|none|void|all) ;;
  *) IFS=, read -r -a devices <<<"$NVIDIA_VISIBLE_DEVICES" ;;
esac
if [ ${#devices[@]} -gt 0 ] && [ "$slots" -gt ${#devices[@]} ]; then
  echo "khorovod-slots: $slots slots but ${#devices[@]} GPU(s) allocated ($NVIDIA_VISIBLE_DEVICES): one process runs per GPU" >&2
  exit 2
fi
device_of() {  # slot: the CUDA_VISIBLE_DEVICES value for it
  local d=${devices[$1]}
  if [[ $d =~ ^[0-9]+$ ]]; then echo "$1"; else echo "$d"; fi
}
if [ "$slots" -le 1 ]; then
  if [ ${#devices[@]} -gt 0 ]; then export CUDA_VISIBLE_DEVICES; CUDA_VISIBLE_DEVICES=$(device_of 0); fi
  exec "$@"
fi
declare -A running=()
for i in $(seq 0 $((slots - 1))); do
  # Each slot serves its metrics on its own port: base + slot.
  port=${KHOROVOD_METRICS_PORT:-0}; [ "$port" -gt 0 ] && port=$((port + i))
  if [ ${#devices[@]} -gt 0 ]; then
    CUDA_VISIBLE_DEVICES=$(device_of "$i") KHOROVOD_WORKER_NAME="${KHOROVOD_WORKER_NAME:-worker}-$i" \
      KHOROVOD_LOCAL_SLOT=$i KHOROVOD_METRICS_PORT=$port "$@" &
  else
    KHOROVOD_WORKER_NAME="${KHOROVOD_WORKER_NAME:-worker}-$i" KHOROVOD_LOCAL_SLOT=$i KHOROVOD_METRICS_PORT=$port "$@" &
  fi
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
