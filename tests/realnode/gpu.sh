#!/usr/bin/env bash
# shellcheck disable=SC2154  # root, work, here: set by the script that sources this one
# The GPU scenarios of the real-node story (sourced by user_story.sh after
# scenarios.sh). The node's GPUs are simulated: khorovod-device-plugin
# advertises NODE_GPUS nvidia.com/gpu devices through the kubelet's
# device-plugin API (scripts/real-node.sh), so scheduling, allocation
# (NVIDIA_VISIBLE_DEVICES) and device health take the real kubelet's path.
# The CUDA program is the one stand-in: the runtime image
# (ghcr.io/khorovod/khorovod-runtime:0.1.0) with the CPU example trainer,
# which prints the device khorovod-slots gave each process.
#   gpu ranks      2 pods x 2 GPUs, no slotsPerWorker: 4 processes, each on
#                  its own device, the device its local rank indexes;
#   gpu shortage   more GPUs wanted than free: the job starts at minReplicas,
#                  says why in the Unschedulable condition, grows when GPUs
#                  free up;
#   gpu unhealthy  a device marked Unhealthy mid-run: the worker on it is
#                  replaced, the node avoided for the cooldown (event,
#                  status), training resumes from its last commit, and after
#                  the cooldown the replacement joins on a healthy GPU (the
#                  job is then deleted: one process alone trains ~100x
#                  faster than two, so no step count both outlasts the
#                  cooldown and ends soon after);
#   gpu example    deploy/examples/horovodjob-gpu.yaml with the stand-in
#                  program, sized for this machine's CPUs and without its
#                  data volume.
NODE_GPUS=${KHOROVOD_NODE_GPUS:-4}
GPU_STEPS=${REALNODE_GPU_STEPS:-3000}

gpu_job() {  # name replicas min gpus-per-pod steps cooldown
  sed -e "s/NAME/$1/" -e "s/REPLICAS/$2/g" -e "s/MIN$/$3/" -e "s/GPUS}/$4}/" -e "s/STEPS/$5/" \
      -e "s/COOLDOWN/$6/" "$here/gpu-job.yaml"
}
new_namespace() { k create namespace "$1" >/dev/null; wait_for 30 k get serviceaccount default -n "$1"; }
status_field() { jp hvdjob "$1" -n "$2" -o jsonpath="{.status.$3}"; }
field_is() { [ "$(status_field "$1" "$2" "$3")" = "$4" ]; }
pod_devices() { k exec -n "$2" "$1" -- printenv NVIDIA_VISIBLE_DEVICES 2>/dev/null; }
# "placement: rank R local_rank L local_size S cross_rank C cross_size X device D" lines of a pod.
placements() { k logs -n "$2" "$1" 2>/dev/null | grep '^placement: '; }
field_of() { sed -nE "s/.* $1 ([^ ]+).*/\1/p" <<<"$2"; }

# gpu_scenario FUNCTION NAMESPACE: runs a scenario, then deletes its
# namespace and waits until it is gone, so that whatever it left (a failed
# step returns early) holds no GPU the next scenario counts on.
gpu_scenario() {
  local t=$SECONDS rc
  "$1"; rc=$?
  k delete namespace "$2" --ignore-not-found --timeout=180s >/dev/null 2>&1 \
    || fail "namespace $2 was not gone within 180s: the next scenarios may lack GPUs"
  real_node gpu-health all healthy >/dev/null 2>&1
  echo "-- $1 took $((SECONDS - t))s"
  return $rc
}

scenario_gpu_node() {
  local n; n=$(jp node khorovod-node -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')
  [ "$n" = "$NODE_GPUS" ] && ok "the node advertises $n nvidia.com/gpu (device plugin registered with the kubelet)" \
    || { fail "the node's allocatable nvidia.com/gpu is '$n', not $NODE_GPUS"; return 1; }
}

scenario_gpu_ranks() {
  local ns=gpu-ranks job=gpu-ranks
  new_namespace "$ns"
  gpu_job "$job" 2 2 2 "$GPU_STEPS" 600 | k apply -n "$ns" -f - >/dev/null
  expect "$job: 2 GPU pods and the rendezvous pod Running" 180 at_least_running "$job" "$ns" 3 \
    || { dump_job "$job" "$ns"; return 1; }
  local slots tol
  slots=$(jp pod "$job-worker-0" -n "$ns" -o jsonpath='{.spec.containers[0].env[?(@.name=="KHOROVOD_SLOTS")].value}')
  [ "$slots" = 2 ] && ok "$job: slotsPerWorker left out defaults to the GPU limit (KHOROVOD_SLOTS=$slots)" \
    || fail "$job: KHOROVOD_SLOTS is '$slots', not 2"
  tol=$(jp pod "$job-worker-0" -n "$ns" -o jsonpath='{.spec.tolerations[?(@.key=="nvidia.com/gpu")].effect}')
  [ "$tol" = NoSchedule ] && ok "$job: workers tolerate nvidia.com/gpu:NoSchedule" || fail "$job: no GPU toleration ('$tol')"
  expect "$job: status.gpus 4 of status.gpusWanted 4" 60 eval 'field_is $job $ns gpus 4 && field_is $job $ns gpusWanted 4'
  local table; table=$(k get hvdjob "$job" -n "$ns")
  echo "$table"
  awk 'NR==1 { for (i = 1; i <= NF; i++) col[$i] = i } NR==2 { exit !($col["GPUS"] == 4 && $col["GPUS-WANTED"] == 4) }' \
    <<<"$table" && ok "kubectl get hvdjob shows GPUS 4 and GPUS-WANTED 4" || fail "kubectl get hvdjob lacks the GPU columns"
  four_placements() { [ "$( (placements "$job-worker-0" "$ns"; placements "$job-worker-1" "$ns") | wc -l)" -ge 4 ]; }
  expect "$job: every process printed its placement" 120 four_placements || { dump_job "$job" "$ns"; return 1; }
  local pod line devices=() all="" bad=0
  for pod in "$job-worker-0" "$job-worker-1"; do
    IFS=, read -r -a devices <<<"$(pod_devices "$pod" "$ns")"
    [ ${#devices[@]} -eq 2 ] || { fail "$pod: NVIDIA_VISIBLE_DEVICES '${devices[*]}' does not hold 2 devices"; bad=1; continue; }
    while read -r line; do
      echo "  $pod: $line (allocated ${devices[*]})"
      local lr dev; lr=$(field_of local_rank "$line"); dev=$(field_of device "$line")
      [ "$(field_of local_size "$line")" = 2 ] && [ "$(field_of cross_size "$line")" = 2 ] && [ "$dev" = "${devices[$lr]}" ] || bad=1
      all+="$dev "
    done < <(placements "$pod" "$ns" | head -2)
  done
  local count unique
  count=$(tr ' ' '\n' <<<"$all" | grep -c .); unique=$(tr ' ' '\n' <<<"$all" | grep . | sort -u | wc -l)
  [ "$count" -eq 4 ] && [ "$unique" -eq 4 ] && [ $bad -eq 0 ] \
    && ok "$job: 4 processes on 4 distinct devices, each the allocated device its local rank indexes ($all)" \
    || fail "$job: devices do not match local ranks or repeat: $all"
  expect "$job: Succeeded" 600 phase_is "$job" "$ns" Succeeded || { dump_job "$job" "$ns"; return 1; }
  ranks_agree "$job" "$ns"
}

scenario_gpu_shortage() {
  local ns=gpu-grow job=gpu-grow held=$((NODE_GPUS - 2))
  new_namespace "$ns"
  # Another user's pod holds all but 2 GPUs.
  k apply -n "$ns" -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: gpu-holder}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: hold
    image: ghcr.io/khorovod/khorovod-runtime:0.1.0
    command: [sleep, "3600"]
    resources: {limits: {nvidia.com/gpu: $held}}
EOF
  expect "a pod holding $held of the $NODE_GPUS GPUs Running" 90 eval \
    '[ "$(jp pod gpu-holder -n $ns -o jsonpath={.status.phase})" = Running ]' || return 1
  gpu_job "$job" 2 1 2 1000000 600 | k apply -n "$ns" -f - >/dev/null
  unschedulable() { condition_of "$job" "$ns" Unschedulable | matches '^True WorkersUnschedulable'; }
  expect "$job: condition Unschedulable=True for the worker that does not fit" 120 unschedulable \
    || { dump_job "$job" "$ns"; return 1; }
  local msg; msg=$(jp hvdjob "$job" -n "$ns" -o jsonpath='{.status.conditions[?(@.type=="Unschedulable")].message}')
  grep -q 'Insufficient nvidia.com/gpu' <<<"$msg" && ok "$job: the condition says why: $msg" || fail "$job: condition message '$msg'"
  started() { phase_is "$job" "$ns" Running && field_is "$job" "$ns" readyReplicas 1; }
  expect "$job: Running at minReplicas (1 pod, 2 GPUs)" 120 started || { dump_job "$job" "$ns"; return 1; }
  expect "$job: status.gpus 2 of gpusWanted 4" 30 eval 'field_is $job $ns gpus 2 && field_is $job $ns gpusWanted 4'
  # Which worker waits is the scheduler's choice.
  local waiting; waiting=$(k get pods -n "$ns" -l "khorovod.dev/job-name=$job,khorovod.dev/role=worker" \
    --field-selector status.phase=Pending -o jsonpath='{.items[0].metadata.name}')
  [ -n "$waiting" ] && ok "$job: $waiting waits (Pending)" || fail "$job: no worker is Pending"
  # grep reads all the logs (-q would end the pipe early: SIGPIPE under pipefail).
  world() { job_logs "$job" "$ns" | grep -E "^step .* world $1\$" >/dev/null; }
  expect "$job: training on 2 processes (step lines with world 2)" 120 world 2 || { dump_job "$job" "$ns"; return 1; }
  k delete pod gpu-holder -n "$ns" --grace-period=1 >/dev/null && ok "the holder released its $held GPUs"
  expect "$job: $waiting is scheduled and Running" 120 eval \
    '[ "$(jp pod $waiting -n $ns -o jsonpath={.status.phase})" = Running ]' || { dump_job "$job" "$ns"; return 1; }
  expect "$job: grew to 4 processes (step lines with world 4)" 180 world 4 || { dump_job "$job" "$ns"; return 1; }
  expect "$job: condition Unschedulable=False, status.gpus 4" 60 eval \
    'condition_of $job $ns Unschedulable | matches "^False" && field_is $job $ns gpus 4'
}

scenario_gpu_unhealthy() {
  local ns=gpu-fail job=gpu-fail cooldown=20
  new_namespace "$ns"
  gpu_job "$job" 2 1 1 "${REALNODE_GPU_FAIL_STEPS:-50000000}" "$cooldown" | k apply -n "$ns" -f - >/dev/null
  expect "$job: 2 one-GPU pods Running" 180 at_least_running "$job" "$ns" 3 || { dump_job "$job" "$ns"; return 1; }
  progress() { job_logs "$job" "$ns" | grep -E '^step +[0-9]*[1-9]00/' >/dev/null; }
  expect "$job: training makes progress" 120 progress || { dump_job "$job" "$ns"; return 1; }
  local dev uid last
  dev=$(pod_devices "$job-worker-1" "$ns"); uid=$(uid_of "$job-worker-1" "$ns")
  [[ $dev =~ ^GPU-sim-[0-9]+$ ]] || { fail "$job-worker-1 has no simulated device ('$dev')"; return 1; }
  last=$(job_logs "$job" "$ns" | sed -nE 's/^step +([0-9]+)\/.*/\1/p' | sort -n | tail -1)
  real_node gpu-health "$dev" unhealthy && ok "marked $dev (worker-1's GPU) Unhealthy after step $last"
  avoided() { events_of "$job" "$ns" | matches "^NodeAvoided: GPU failure of $job-worker-1 (GPU $dev Unhealthy) on node khorovod-node"; }
  expect "$job: event NodeAvoided names worker-1, $dev and the node" 90 avoided || { dump_job "$job" "$ns"; return 1; }
  local node; node=$(status_field "$job" "$ns" 'avoidedNodes[0].node')
  [ "$node" = khorovod-node ] && ok "$job: status.avoidedNodes holds khorovod-node until $(status_field "$job" "$ns" 'avoidedNodes[0].until')" \
    || fail "$job: status.avoidedNodes '$node'"
  replaced_avoiding() {
    local s; s=$(jp pod "$job-worker-1" -n "$ns" -o jsonpath='{.metadata.uid} {.metadata.annotations.khorovod\.dev/avoided-nodes}')
    [ -n "$s" ] && [ "${s% *}" != "$uid" ] && [ "${s#* }" = khorovod-node ]
  }
  expect "$job: worker-1 replaced by a pod whose affinity avoids the node" 90 replaced_avoiding \
    || { dump_job "$job" "$ns"; return 1; }
  resumed() { job_logs "$job" "$ns" | sed -nE 's/^ring re-formed: world size [0-9]+; resuming from committed step ([0-9]+)/\1/p' | tail -1; }
  expect "$job: the ring re-formed without the failed worker" 120 eval '[ -n "$(resumed)" ]'
  local from; from=$(resumed)
  [ -n "$from" ] && [ "$from" -ge "$last" ] && ok "$job: resumed from committed step $from (>= step $last seen before the failure)" \
    || fail "$job: resumed from step '$from', before the last step seen ($last)"
  runs_elsewhere() {
    running_with_new_uid "$job-worker-1" "$ns" "$uid" && [ -n "$(pod_devices "$job-worker-1" "$ns")" ] &&
      [ "$(pod_devices "$job-worker-1" "$ns")" != "$dev" ]
  }
  expect "$job: after the ${cooldown}s cooldown worker-1 runs again, on a healthy GPU" 180 runs_elsewhere \
    || { dump_job "$job" "$ns"; return 1; }
  local r; r=$(restarts_of "$job" "$ns")
  [ "${r:-0}" -ge 1 ] && ok "$job: status.restartCount counts the GPU failure ($r)" || fail "$job: restartCount '$r'"
  two_again() {
    job_logs "$job" "$ns" | sed -nE 's/^ring re-formed: world size 2; resuming from committed step ([0-9]+)/\1/p' |
      awk -v from="$from" '$1 >= from { found = 1 } END { exit !found }'
  }
  expect "$job: the ring re-formed with the replacement (world size 2, from a commit >= step $from)" 120 two_again \
    || dump_job "$job" "$ns"
}

# The GPU example as written, but for the CUDA program (the stand-in image and
# trainer), its data volume (an emptyDir) and its CPU and memory size.
scenario_gpu_example() {
  local ns=gpu-example job=resnet50-gpu f="$root/deploy/examples/horovodjob-gpu.yaml"
  new_namespace "$ns"
  sed -e 's|image: ghcr.io/khorovod/khorovod-runtime-cuda:0.1.0|image: ghcr.io/khorovod/khorovod-runtime:0.1.0|' \
      -e 's|command: \[khorovod-slots, python3, /workspace/train_resnet50.py\]|command: [khorovod-slots, khorovod-example-trainer, --steps, "600", --log-every, "100"]|' \
      -e 's|persistentVolumeClaim: {claimName: imagenet}|emptyDir: {}|' \
      -e 's|cpu: "16", memory: 64Gi|cpu: 200m, memory: 512Mi|' "$f" > "$work/gpu-example.yaml"
  [ "$(diff "$f" "$work/gpu-example.yaml" | grep -c '^>')" -eq 4 ] && ok "the GPU example with 4 lines changed (program, data, CPU/memory)" \
    || { fail "the GPU example no longer has the lines the test replaces"; diff "$f" "$work/gpu-example.yaml"; return 1; }
  k apply -n "$ns" -f "$work/gpu-example.yaml" >/dev/null && ok "kubectl apply of the GPU example" || { fail "apply of the GPU example"; return 1; }
  local per_pod; per_pod=$(sed -nE 's/.*nvidia.com\/gpu: ([0-9]+).*/\1/p' "$f")
  local fit=$((NODE_GPUS / per_pod))
  expect "$job: $fit pods of $per_pod GPUs Running (what $NODE_GPUS GPUs hold)" 180 at_least_running "$job" "$ns" $((fit + 1)) \
    || { dump_job "$job" "$ns"; return 1; }
  expect "$job: status.gpus $((fit * per_pod))" 60 field_is "$job" "$ns" gpus $((fit * per_pod))
  expect "$job: Succeeded" 600 phase_is "$job" "$ns" Succeeded || { dump_job "$job" "$ns"; return 1; }
  ranks_agree "$job" "$ns"
}
