#!/usr/bin/env bash
# The user's whole story on a real node (scripts/real-node.sh must be up and
# the images loaded; tests/realnode/run.sh does both), asserted through the API:
#   0. the node runs containerd (kubectl get nodes -o wide, in the log) and
#      nothing in it routes off the machine;
#   1. helm install of the operator from its image; Prometheus scraping what
#      the chart's ServiceMonitor and PodMonitor select;
#   2. deploy/examples/horovodjob-cpu.yaml applied as written: Succeeded;
#      the GPU example passes server-side validation and its image has a
#      Dockerfile;
#   3. a long elastic job: a worker's process killed, another worker deleted
#      with --force, kubectl scale down and up, the rendezvous pod deleted;
#      Succeeded with every rank agreeing; phases, conditions, events and the
#      restart count tell the story;
#   4. the same worker index failing 3 times: Failed, BackoffLimitExceeded;
#   5. slotsPerWorker 2 with one slot dying: its pod fails and is replaced;
#   6. a Horovod PyTorch script on the PyTorch image: Succeeded, and
#      Prometheus holds its step-efficiency and throughput series;
#   6b. deploy/examples/horovodjob-keras.yaml on the TensorFlow image: a
#      worker killed mid-epoch, the job re-formed and the worker replaced,
#      Succeeded with one set of weights on every rank, its step series
#      in Prometheus (keras.sh);
#   7. GPUs (simulated, through the kubelet's device-plugin API; gpu.sh):
#      one process per GPU on its own device, a job short of GPUs starting
#      small and growing, a GPU going Unhealthy mid-run, the GPU example.
# Prints "realnode: N passed, M failed"; exit status 0 only if none failed.
# REALNODE_SCENARIOS (default: all) runs only the named ones after step 1,
# of: cpu_example gpu_manifest story backoff slots pytorch keras gpu.
# Usage: user_story.sh WORK_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tests/realnode"
work=${1:?usage: user_story.sh WORK_DIR}
mkdir -p "$work"
source "$here/lib.sh"
source "$here/prometheus.sh"
source "$here/scenarios.sh"
source "$here/keras.sh"
source "$here/gpu.sh"
STEPS=${REALNODE_STEPS:-4000}
wanted() { [ -z "${REALNODE_SCENARIOS:-}" ] || [[ " $REALNODE_SCENARIOS " == *" $1 "* ]]; }


echo "== the node"
nodes=$(k get nodes -o wide)
echo "$nodes"
grep -q 'containerd://' <<<"$nodes" && ok "the node runs containerd (kubectl get nodes -o wide)" \
  || fail "kubectl get nodes -o wide shows no containerd runtime"
echo "== operator (helm install) and Prometheus"
install_operator && check_isolation && start_prometheus

if wanted cpu_example; then echo "== deploy/examples/horovodjob-cpu.yaml as written"; scenario_cpu_example; fi
wanted gpu_manifest && scenario_gpu_manifest
if wanted story; then echo "== elastic story: kill, force-delete, scale, rendezvous loss"; scenario_story; fi
if wanted backoff; then echo "== the same worker index failing 3 times"; scenario_backoff; fi
if wanted slots; then echo "== slotsPerWorker 2, one slot dies"; scenario_slots; fi
if wanted pytorch; then echo "== PyTorch job on the PyTorch image, seen by Prometheus"; scenario_pytorch; fi
if wanted keras; then echo "== Keras job on the TensorFlow image: a worker killed mid-epoch"; scenario_keras; fi
gpu_t0=$SECONDS
if wanted gpu; then
  echo "== GPUs: simulated nvidia.com/gpu through the kubelet's device-plugin API"
  if scenario_gpu_node; then
    echo "-- 2 pods x 2 GPUs, one process per GPU"; gpu_scenario scenario_gpu_ranks gpu-ranks
    echo "-- more GPUs wanted than free"; gpu_scenario scenario_gpu_shortage gpu-grow
    echo "-- a GPU goes Unhealthy mid-run"; gpu_scenario scenario_gpu_unhealthy gpu-fail
    echo "-- deploy/examples/horovodjob-gpu.yaml"; gpu_scenario scenario_gpu_example gpu-example
  fi
  echo "realnode: GPU scenarios took $((SECONDS - gpu_t0))s"
fi

echo "realnode: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
