#!/usr/bin/env bash
# deploy/docker/slot-entrypoint.sh (khorovod-slots): each slot gets its own
# GPU from NVIDIA_VISIBLE_DEVICES in CUDA_VISIBLE_DEVICES (a UUID-style ID as
# is, a numeric index as the container-local index), its slot in
# KHOROVOD_LOCAL_SLOT and its worker name; more slots than GPUs is refused;
# no device list leaves CUDA_VISIBLE_DEVICES alone. Runs the real script
# with `sh -c` printing what each slot sees.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
entry="$root/deploy/docker/slot-entrypoint.sh"
failed=0
check() {  # description expected actual
  if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected '$2', got '$3'"; failed=1; fi
}
show='echo "$KHOROVOD_LOCAL_SLOT $KHOROVOD_WORKER_NAME ${CUDA_VISIBLE_DEVICES-unset} $KHOROVOD_GPU_ERROR_EXIT_CODE"'
run() { env -i PATH="$PATH" "$@" timeout 20 bash "$entry" sh -c "$show" 2>&1 | sort; }

out=$(run KHOROVOD_SLOTS=2 KHOROVOD_WORKER_NAME=p NVIDIA_VISIBLE_DEVICES=GPU-sim-5,GPU-sim-2)
check "two slots, two device IDs: slot i gets the i-th" $'0 p-0 GPU-sim-5 121\n1 p-1 GPU-sim-2 121' "$out"
out=$(run KHOROVOD_SLOTS=2 KHOROVOD_WORKER_NAME=p NVIDIA_VISIBLE_DEVICES=3,7)
check "numeric indices become container-local indices" $'0 p-0 0 121\n1 p-1 1 121' "$out"
out=$(run KHOROVOD_SLOTS=1 KHOROVOD_WORKER_NAME=p NVIDIA_VISIBLE_DEVICES=GPU-abc)
check "one slot execs the command with its device" " p GPU-abc 121" "$out"
out=$(run KHOROVOD_SLOTS=2 KHOROVOD_WORKER_NAME=p NVIDIA_VISIBLE_DEVICES=all)
check "'all' leaves CUDA_VISIBLE_DEVICES alone" $'0 p-0 unset 121\n1 p-1 unset 121' "$out"
out=$(run KHOROVOD_SLOTS=2 KHOROVOD_WORKER_NAME=p)
check "no device list leaves CUDA_VISIBLE_DEVICES alone" $'0 p-0 unset 121\n1 p-1 unset 121' "$out"
out=$(env -i PATH="$PATH" KHOROVOD_SLOTS=3 NVIDIA_VISIBLE_DEVICES=a,b timeout 20 bash "$entry" true 2>&1); rc=$?
check "more slots than GPUs exits 2" 2 "$rc"
check "... and says so" "khorovod-slots: 3 slots but 2 GPU(s) allocated (a,b): one process runs per GPU" "$out"
out=$(env -i PATH="$PATH" KHOROVOD_SLOTS=2 KHOROVOD_GPU_ERROR_EXIT_CODE=7 timeout 20 bash "$entry" sh -c 'exit $KHOROVOD_GPU_ERROR_EXIT_CODE' 2>/dev/null); rc=$?
check "a slot's GPU-error status is the pod's" 7 "$rc"
[ $failed -eq 0 ] && echo "PASS" || exit 1
