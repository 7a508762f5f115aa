#!/usr/bin/env bash
# shellcheck disable=SC2154  # root, work, here: set by the script that sources this one
# Issue 31's multi-node GPU scenarios (sourced by tests/multinode/story.sh),
# on the cluster's mixed nodes (KHOROVOD_CLUSTER_GPUS, default 2,2,0: GPU
# nodes khvc-n1 and khvc-n2, CPU node khvc-n3), with the simulated GPUs of
# the project's device plugin:
#   gpu placement  a Pack job (the default for GPU jobs) and a Spread job,
#                  2 pods x 1 GPU each: Pack puts both on one node, Spread
#                  asks for two (a preference the scheduler may outweigh: in
#                  one of three runs both landed on one node); GPU workers
#                  land only on GPU nodes;
#   gpu avoid      a device marked Unhealthy mid-run: NodeAvoided names its
#                  node, the replacement lands on the other GPU node, and
#                  training resumes from its last commit.
GPU_JOB="$root/tests/realnode/gpu-job.yaml"

mgpu_job() {  # name replicas min gpus steps cooldown placement
  sed -e "s/NAME/$1/" -e "s/REPLICAS/$2/g" -e "s/MIN$/$3/" -e "s/GPUS}/$4}/" -e "s/STEPS/$5/" \
      -e "s/COOLDOWN/$6/" -e "s/^  schedulingPolicy:/  schedulingPolicy:\n    placement: $7/" "$GPU_JOB"
}
gpu_nodes() { k get nodes -l nvidia.com/gpu.present=true -o jsonpath='{.items[*].metadata.name}'; }

scenario_gpu_placement() {
  local ns=mn-gpu placement job nodes
  new_ns "$ns"
  local gpu_set; gpu_set=" $(gpu_nodes) "
  for placement in Pack Spread; do
    job=gpu-${placement,,}
    mgpu_job "$job" 2 2 1 "${MULTINODE_GPU_STEPS:-300}" 600 "$placement" | k apply -n "$ns" -f - >/dev/null
    expect "$job: 2 one-GPU workers Running" 180 at_least_running "$job" "$ns" 3 || { dump_job "$job" "$ns"; continue; }
    nodes=$(worker_nodes "$job" "$ns" | awk '{print $2}' | sort | tr '\n' ' ')
    local n; n=$(tr ' ' '\n' <<<"$nodes" | grep -c . ); local distinct; distinct=$(tr ' ' '\n' <<<"$nodes" | grep . | sort -u | wc -l)
    local off=0 node; for node in $nodes; do [[ $gpu_set == *" $node "* ]] || off=1; done
    [ "$n" -eq 2 ] && [ $off -eq 0 ] && ok "$job: GPU workers only on GPU nodes ($nodes; GPU nodes:$gpu_set)" \
      || fail "$job: a GPU worker on a node without GPUs ($nodes; GPU nodes:$gpu_set)"
    if [ "$placement" = Pack ]; then
      [ "$distinct" -eq 1 ] && ok "$job: Pack put both workers on one node ($nodes)" || fail "$job: Pack spread the workers over $distinct nodes ($nodes)"
    else
      # The operator's Spread is a preference (ScheduleAnyway): the
      # scheduler weighs it against its other scores, so where the pods land
      # is printed, and the preference itself is what is asserted.
      local tsc; tsc=$(jp pod "$job-worker-0" -n "$ns" -o jsonpath='{.spec.topologySpreadConstraints[?(@.topologyKey=="kubernetes.io/hostname")].whenUnsatisfiable}')
      [ "$tsc" = ScheduleAnyway ] && ok "$job: Spread asks the scheduler to spread the workers over nodes (hostname constraint, $tsc); they landed on $distinct node(s): $nodes" \
        || fail "$job: Spread's workers carry no hostname spread constraint ('$tsc')"
    fi
    expect "$job: Succeeded" 600 phase_is "$job" "$ns" Succeeded || { dump_job "$job" "$ns"; continue; }
    ranks_agree "$job" "$ns"
    k delete hvdjob "$job" -n "$ns" --wait=true --timeout 60s >/dev/null 2>&1
  done
  k delete namespace "$ns" --wait=false >/dev/null
}

scenario_gpu_avoid() {
  local ns=mn-gpu-avoid job=gpu-avoid
  new_ns "$ns"
  mgpu_job "$job" 2 1 1 "${MULTINODE_GPU_FAIL_STEPS:-50000000}" 600 Spread | k apply -n "$ns" -f - >/dev/null
  expect "$job: 2 one-GPU workers Running" 180 at_least_running "$job" "$ns" 3 || { dump_job "$job" "$ns"; return 1; }
  expect "$job: training makes progress" 120 progress_past "$job" "$ns" 100 || { dump_job "$job" "$ns"; return 1; }
  local pod=$job-worker-1 node dev uid last
  node=$(jp pod "$pod" -n "$ns" -o jsonpath='{.spec.nodeName}'); uid=$(uid_of "$pod" "$ns")
  dev=$(k exec -n "$ns" "$pod" -- printenv NVIDIA_VISIBLE_DEVICES 2>/dev/null)
  [[ $dev =~ ^GPU-sim-[0-9]+$ ]] || { fail "$pod has no simulated device ('$dev')"; return 1; }
  last=$(last_step "$job" "$ns")
  real_node gpu-health "$(node_index "$node")" "$dev" unhealthy && ok "$job: marked $dev on $node ($pod's GPU) Unhealthy after step $last"
  avoided() { events_of "$job" "$ns" | matches "^NodeAvoided: .*$node"; }
  expect "$job: event NodeAvoided names $node" 90 avoided || { dump_job "$job" "$ns"; return 1; }
  elsewhere() {
    local s; s=$(jp pod "$pod" -n "$ns" -o jsonpath='{.metadata.uid} {.spec.nodeName} {.status.phase}')
    read -r u n p <<<"$s"; [ -n "$u" ] && [ "$u" != "$uid" ] && [ -n "$n" ] && [ "$n" != "$node" ] && [ "$p" = Running ]
  }
  expect "$job: $pod replaced on another node than $node" 120 elsewhere || { dump_job "$job" "$ns"; return 1; }
  local new_node; new_node=$(jp pod "$pod" -n "$ns" -o jsonpath='{.spec.nodeName}')
  [[ " $(gpu_nodes) " == *" $new_node "* ]] && ok "$job: the replacement runs on GPU node $new_node" || fail "$job: the replacement runs on $new_node, which has no GPUs"
  expect "$job: the ring re-formed from a commit >= step $last" 120 eval 'resumes $job $ns | awk -v s=$last '"'"'$2 >= s {f = 1} END {exit !f}'"'"''
  k delete namespace "$ns" --wait=false >/dev/null
  real_node gpu-health "$(node_index "$node")" all healthy >/dev/null
}
