#!/usr/bin/env bash
# shellcheck disable=SC2154  # root, work, here: set by the script that sources this one
# The scenarios of the real-node user story (sourced by user_story.sh; see
# its header). Each returns early when a step fails: later steps depend on it.
SOCK=${KHOROVOD_NODE_DIR:-/var/lib/khorovod-node}/run/containerd.sock

install_operator() {
  if in_node helm install khorovod "$root/charts/khorovod" -n khorovod-system --create-namespace \
       --set operator.leaderElection.leaseDurationSeconds=6,operator.leaderElection.renewDeadlineSeconds=4,operator.leaderElection.retryPeriodSeconds=1 \
       --wait --timeout 180s > "$work/helm.log" 2>&1; then
    ok "helm install of the chart, operator pod Ready"
  else
    fail "helm install"; cat "$work/helm.log"; k get pods -A -o wide; k logs -n khorovod-system deploy/khorovod --tail 30
    return 1
  fi
  local user; user=$(jp pods -n khorovod-system -l app.kubernetes.io/name=khorovod -o jsonpath='{.items[0].spec.securityContext.runAsUser}')
  [ "$user" = 65532 ] && ok "operator pod runs as non-root ($user)" || fail "operator pod user '$user'"
  # It talks to the API through the kubernetes Service with its service-account
  # token and verified TLS; holding the leader lease proves it does.
  leader() { jp lease khorovod -n khorovod-system -o jsonpath='{.spec.holderIdentity}' | matches khorovod; }
  expect "operator holds its leader Lease (in-cluster config, verified TLS to the Service address)" 60 leader
}

# Exit codes, restart counts and events of a job, for the assertions.
# One line per Event object: "REASON: MESSAGE (xCOUNT)"; the recorder folds
# repeats of one reason and message into one object with a count.
events_of() { k get events -n "$2" --field-selector "involvedObject.name=$1" -o jsonpath='{range .items[*]}{.reason}{": "}{.message}{" (x"}{.count}{")\n"}{end}'; }
# event_count JOB NS REGEX: how many times matching events were recorded.
event_count() { events_of "$1" "$2" | grep -E "$3" | sed -nE 's/.*\(x([0-9]*)\)$/\1/p' | awk '{n += ($1 == "" ? 1 : $1)} END {print n + 0}'; }
restarts_of() { jp hvdjob "$1" -n "$2" -o jsonpath='{.status.restartCount}'; }
condition_of() { jp hvdjob "$1" -n "$2" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].status} {.status.conditions[?(@.type==\"$3\")].reason}"; }
uid_of() { jp pod "$1" -n "$2" -o jsonpath='{.metadata.uid}'; }
running_with_new_uid() {  # pod ns old_uid
  local s; s=$(jp pod "$1" -n "$2" -o jsonpath='{.metadata.uid} {.status.phase}')
  [ -n "$s" ] && [ "${s% *}" != "$3" ] && [ "${s#* }" = Running ]
}
running_pods() { k get pods -n "$2" -l "khorovod.dev/job-name=$1" --field-selector status.phase=Running --no-headers 2>/dev/null | wc -l; }
at_least_running() { [ "$(running_pods "$1" "$2")" -ge "$3" ]; }
ranks_agree() {  # job ns: prints the agreement line of rank 0 and checks one checksum
  local logs; logs=$(job_logs "$1" "$2")
  local agree sums
  agree=$(sed -nE 's/^all ([0-9]+) ranks agree on the parameters/\1/p' <<<"$logs" | tail -1)
  sums=$(sed -nE 's/^rank [0-9]+ parameters checksum ([0-9a-f]+)/\1/p' <<<"$logs" | sort -u)
  if [ -n "$agree" ] && [ "$(wc -l <<<"$sums")" -eq 1 ]; then ok "$1: all $agree final ranks agree on the parameters ($sums)"
  else fail "$1: ranks disagree or did not finish: agree='$agree' checksums=$(echo $sums)"; fi
}
# The host pid of a pod's first container (containerd's task list).
container_pid() {
  local cid; cid=$(jp pod "$1" -n "$2" -o jsonpath='{.status.containerStatuses[0].containerID}'); cid=${cid#containerd://}
  [ -n "$cid" ] && ctr --address "$SOCK" -n k8s.io tasks ls 2>/dev/null | awk -v c="$cid" '$1 == c {print $2}'
}

scenario_cpu_example() {
  local ns=examples job=mlp-cpu
  k create namespace "$ns" >/dev/null
  wait_for 30 k get serviceaccount default -n "$ns"
  k apply -n "$ns" -f "$root/deploy/examples/horovodjob-cpu.yaml" >/dev/null && ok "kubectl apply -f deploy/examples/horovodjob-cpu.yaml" \
    || { fail "kubectl apply of the CPU example"; return 1; }
  expect "$job: 4 workers Running" 180 at_least_running "$job" "$ns" 4 || { dump_job "$job" "$ns"; return 1; }
  expect "$job: Succeeded" 300 phase_is "$job" "$ns" Succeeded || { dump_job "$job" "$ns"; return 1; }
  ranks_agree "$job" "$ns"
  k delete namespace "$ns" --wait=false >/dev/null
}

scenario_story() {
  local ns=story job=story
  k create namespace "$ns" >/dev/null
  wait_for 30 k get serviceaccount default -n "$ns"
  # Three times the other jobs' steps: on a quiet machine 4000 steps ended
  # 2 s after the rendezvous pod came back, before the workers could form a
  # generation on it (the phases' pod starts and heartbeats are a fixed
  # cost, the steps are not). Not --train-seconds: a slow machine's phases
  # would outlast any fixed time, while its steps slow down with them.
  sed "s/STEPS/$((STEPS * 3))/" "$here/story-job.yaml" | k apply -n "$ns" -f - >/dev/null
  # Every phase the job shows (a watch sees every status write).
  real_node kubectl get hvdjob "$job" -n "$ns" --watch --request-timeout=0 -o jsonpath='{.status.phase}{"\n"}' \
    > "$work/story-phases.txt" 2>/dev/null &
  local watch_pid=$!
  story_steps "$ns" "$job" || dump_job "$job" "$ns"
  kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null
  local history; history=$(uniq "$work/story-phases.txt" | grep -v '^$' | tr '\n' ' ')
  echo "status history: $history"
  for p in Running Scaling Succeeded; do
    grep -qw "$p" <<<"$history" && ok "status history shows $p" || fail "status history lacks $p: $history"
  done
}

story_steps() {
  local ns=$1 job=$2
  expect "4 workers and the rendezvous pod Running" 180 at_least_running "$job" "$ns" 5 || return 1
  progress() { job_logs "$job" "$ns" | matches -E '^step +[0-9]*[1-9]00/'; }
  expect "training makes progress (step lines from rank 0)" 120 progress || return 1
  trained() { jp hvdjob "$job" -n "$ns" -o jsonpath='{.status.readyReplicas}' | matches -x 4; }
  expect "status.readyReplicas 4 (probes and pod readiness from the kubelet)" 60 trained
  # The PodMonitor's selection reaches the workers and the rendezvous server.
  prom_has() { prom_query "$1" | matches '"value"'; }
  expect "Prometheus sees the workers' steps rising" 60 \
    prom_has "sum(increase(khorovod_worker_steps_total{khorovod_job=\"$job\"}[1m])) > 0"
  expect "Prometheus scrapes the rendezvous server" 60 prom_has "khorovod_rendezvous_generation{khorovod_job=\"$job\"}"

  # A worker's process killed on the node: the container exits 137, the pod
  # fails, the operator counts a restart and replaces it.
  local pid uid; uid=$(uid_of "$job-worker-1" "$ns"); pid=$(container_pid "$job-worker-1" "$ns")
  if [ -n "$pid" ] && kill -9 "$pid"; then ok "killed worker-1's trainer process (host pid $pid)"
  else fail "could not find worker-1's container process"; return 1; fi
  failed_event() { events_of "$job" "$ns" | matches -E "WorkerFailed: worker $job-worker-1 failed \(exit code 137"; }
  expect "WorkerFailed event for worker-1 with exit code 137" 60 failed_event
  expect "the operator replaced worker-1 and it runs" 90 running_with_new_uid "$job-worker-1" "$ns" "$uid" || return 1
  local r; r=$(restarts_of "$job" "$ns")
  [ "${r:-0}" -ge 1 ] && ok "status.restartCount counts the failure ($r)" || fail "status.restartCount '$r' after a failure"

  # kubectl delete pod --force: the pod object goes at once; the operator re-creates it.
  uid=$(uid_of "$job-worker-2" "$ns")
  k delete pod "$job-worker-2" -n "$ns" --force --grace-period=0 >/dev/null 2>&1 && ok "kubectl delete pod $job-worker-2 --force"
  expect "the operator re-created worker-2 and it runs" 90 running_with_new_uid "$job-worker-2" "$ns" "$uid" || return 1

  rdv_log() { k logs -n "$ns" "$job-rendezvous" 2>/dev/null; }
  members() { [ "$(rdv_log | grep -E 'generation [0-9]+ formed' | tail -1 | grep -o "$job-worker-" | wc -l)" -eq "$1" ]; }
  expect "a generation of 4 formed with both replacements" 120 members 4 || return 1

  k scale hvdjob "$job" -n "$ns" --replicas 3 >/dev/null && ok "kubectl scale --replicas 3"
  expect "a generation of 3 formed after scale-down" 90 members 3 || return 1
  gone3() { ! k get pod "$job-worker-3" -n "$ns" >/dev/null 2>&1; }
  expect "the highest index (worker-3) was removed" 60 gone3
  k scale hvdjob "$job" -n "$ns" --replicas 4 >/dev/null && ok "kubectl scale --replicas 4"
  expect "a generation of 4 formed after scale-up" 120 members 4 || return 1

  # The rendezvous pod lost mid-run: the operator re-creates it and the
  # workers form a new generation on it.
  uid=$(uid_of "$job-rendezvous" "$ns")
  k delete pod "$job-rendezvous" -n "$ns" --wait=false >/dev/null && ok "kubectl delete pod $job-rendezvous mid-run"
  expect "the rendezvous pod was re-created and runs" 90 running_with_new_uid "$job-rendezvous" "$ns" "$uid" || return 1
  expect "the workers formed a generation of 4 on the new rendezvous server" 120 members 4 || return 1

  expect "job Succeeded" 600 phase_is "$job" "$ns" Succeeded || return 1
  ranks_agree "$job" "$ns"
  read -r final initial < <(job_logs "$job" "$ns" | sed -nE 's/^final loss ([0-9.]+) \(initial ([0-9.]+)\).*/\1 \2/p' | tail -1)
  if [ -n "${final:-}" ] && awk -v f="$final" -v i="$initial" 'BEGIN { exit !(f < 0.7 * i) }'; then
    ok "loss fell from $initial to $final"; else fail "loss did not fall enough (${initial:-?} -> ${final:-?})"; fi
  local c; c=$(condition_of "$job" "$ns" Succeeded)
  [ "${c% *}" = True ] && ok "condition Succeeded=True ($c)" || fail "condition Succeeded: '$c'"
  local ev; ev=$(events_of "$job" "$ns")
  for reason in SuccessfulCreatePod SuccessfulDeletePod WorkerFailed JobSucceeded; do
    grep -q "^$reason:" <<<"$ev" && ok "events show $reason" || fail "events lack $reason"
  done
}

scenario_backoff() {
  local ns=crashloop job=crashloop
  k create namespace "$ns" >/dev/null
  wait_for 30 k get serviceaccount default -n "$ns"
  k apply -n "$ns" -f "$here/backoff-job.yaml" >/dev/null
  expect "$job: Failed after worker-1 failed 3 times (backoffLimit 2)" 300 phase_is "$job" "$ns" Failed \
    || { dump_job "$job" "$ns"; return 1; }
  local c r n
  c=$(condition_of "$job" "$ns" Failed); r=$(restarts_of "$job" "$ns")
  [ "$c" = "True BackoffLimitExceeded" ] && ok "condition Failed=True, reason BackoffLimitExceeded" || fail "condition Failed: '$c'"
  [ "$r" = 3 ] && ok "status.restartCount 3" || fail "status.restartCount '$r' (expected 3)"
  n=$(event_count "$job" "$ns" "^WorkerFailed: worker $job-worker-1 failed \(exit code 3")
  [ "$n" -ge 2 ] && ok "WorkerFailed events for worker-1 exit code 3 ($n, the third ended the job)" \
    || fail "WorkerFailed events for worker-1: $n"
  # The operator records a phase's events after writing the status.
  has_backoff_event() { events_of "$job" "$ns" | matches "BackoffLimitExceeded"; }
  expect "event BackoffLimitExceeded" 30 has_backoff_event
  k delete namespace "$ns" --wait=false >/dev/null
}

scenario_slots() {
  local ns=slots job=slots
  k create namespace "$ns" >/dev/null
  wait_for 30 k get serviceaccount default -n "$ns"
  # Long enough that the operator sees the dead slot's pod fail before the
  # other pod's slots finish training: on a quiet machine 2000 steps took
  # 8 s, the job succeeded first and the failure was never reported.
  sed -e "s/STEPS/$((STEPS * 5))/" -e "s/FAIL_AT/300/" "$here/slots-job.yaml" | k apply -n "$ns" -f - >/dev/null
  expect "$job: 2 pods with 2 slots each Running" 180 at_least_running "$job" "$ns" 2 || { dump_job "$job" "$ns"; return 1; }
  slot_failed() { events_of "$job" "$ns" | matches -E "WorkerFailed: worker $job-worker-[01] failed \(exit code 137"; }
  expect "the pod whose slot died failed with the slot's status 137 (not success)" 240 slot_failed \
    || { dump_job "$job" "$ns"; return 1; }
  expect "$job: Succeeded after the replacement" 600 phase_is "$job" "$ns" Succeeded || { dump_job "$job" "$ns"; return 1; }
  local r; r=$(restarts_of "$job" "$ns")
  [ "${r:-0}" -ge 1 ] && ok "status.restartCount $r" || fail "status.restartCount '$r'"
  ranks_agree "$job" "$ns"
  k delete namespace "$ns" --wait=false >/dev/null
}

scenario_pytorch() {
  local ns=torch job=torch-mnist
  k create namespace "$ns" >/dev/null
  wait_for 30 k get serviceaccount default -n "$ns"
  k create configmap torch-scripts -n "$ns" --from-file "$root/examples/python/mnist_synthetic.py" >/dev/null
  # Long enough for Prometheus (2 s scrapes, after discovering the pods) to
  # take several samples of the workers: on a quiet machine 3 epochs of
  # 2048 samples ended 8 s after the containers started, before any scrape.
  sed "s/EPOCHS/${REALNODE_TORCH_EPOCHS:-10}/" "$here/pytorch-job.yaml" | k apply -n "$ns" -f - >/dev/null
  expect "$job: 2 PyTorch workers Running" 300 at_least_running "$job" "$ns" 3 || { dump_job "$job" "$ns"; return 1; }
  expect_job_metrics "$job" "the PyTorch job"
  expect "$job: Succeeded" 900 phase_is "$job" "$ns" Succeeded || { dump_job "$job" "$ns"; return 1; }
  job_logs "$job" "$ns" | matches '^final accuracy' && ok "rank 0 printed its final accuracy: $(job_logs "$job" "$ns" | grep '^final accuracy' | tail -1)" \
    || fail "no final accuracy in the PyTorch job's logs"
}

# expect_job_metrics JOB WHAT: Prometheus holds the workers' own step
# gauges and the dashboard's recorded efficiency and throughput
# (deploy/monitoring/khorovod-rules.yaml) for JOB.
expect_job_metrics() {
  local sel="khorovod_job=\"$1\"" what=$2 m
  series() { prom_query "last_over_time($1{$sel}[30m])" | matches '"value"'; }
  for m in khorovod_worker_step_efficiency khorovod_worker_throughput_samples_per_second \
           khorovod_job:step_efficiency:ratio_rate1m khorovod_job:samples_per_second:rate1m; do
    expect "Prometheus holds $m for $what" 300 series "$m"
  done
}

# The GPU example cannot run here (no GPU): it must pass the API server's
# validation (server-side dry run) and name an image that has a Dockerfile.
scenario_gpu_manifest() {
  local f="$root/deploy/examples/horovodjob-gpu.yaml" out
  k create namespace gpu-example >/dev/null
  if out=$(k apply -n gpu-example --dry-run=server -f "$f" 2>&1); then ok "deploy/examples/horovodjob-gpu.yaml passes server-side validation"
  else fail "the GPU example is refused: $out"; fi
  local image; image=$(sed -nE 's/^ *image: *([^ ]+).*/\1/p' "$f" | head -1)
  if grep -lq -- "-t $image" "$root"/deploy/docker/*.Dockerfile; then ok "the GPU example's image $image has a Dockerfile"
  else fail "no Dockerfile in deploy/docker builds $image"; fi
  k delete namespace gpu-example --wait=false >/dev/null
}

# Nothing the node runs can route off the machine: its namespace has no
# default route and no interface but its loopback and the pod bridge (with
# the pods' veth ends), and a pod has routes to the cluster's ranges only.
check_isolation() {
  local routes links pod_routes
  routes=$(in_node ip route show table all 2>&1)
  links=$(in_node ip -o link show 2>&1 | awk -F': ' '{print $2}' | sed 's/@.*//')
  if ! grep -q '^default' <<<"$routes"; then ok "the node's network namespace has no default route"
  else fail "the node's namespace has a default route: $(grep '^default' <<<"$routes")"; fi
  local other; other=$(grep -vxE 'lo|khv-cni0|veth[0-9a-f]+' <<<"$links" | tr '\n' ' ')
  [ -z "$other" ] && ok "the node's namespace holds only its loopback, the pod bridge and pod veths" \
    || fail "unexpected interfaces in the node's namespace: $other"
  pod_routes=$(k exec -n khorovod-system deploy/khorovod -- cat /proc/net/route 2>/dev/null | awk 'NR>1 {print $2}')
  if [ -n "$pod_routes" ] && ! grep -qx 00000000 <<<"$pod_routes"; then ok "a pod (the operator) has no default route"
  else fail "a pod has a default route or its routes could not be read: $(echo $pod_routes)"; fi
}
