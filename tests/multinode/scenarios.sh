#!/usr/bin/env bash
# shellcheck disable=SC2154  # root, work, here: set by the script that sources this one
# The multi-node scenarios of issue 30 (sourced by tests/multinode/story.sh):
# a job spread over the nodes; a node crashed; a node's network cut; drain,
# preemption and scaling of one job. Each disruption asserts, from the API
# and the workers' own output: the survivors re-form (REFORM_BOUND), the lost
# worker is replaced on a healthy node (REPLACE_BOUND), the job is never below
# minReplicas longer than that bound, training resumes from a commit at or
# after the last step seen before the disruption, and the final parameters
# agree on every rank. A check that needs an operator feature of issue 30
# names it. Each scenario returns early when a step it depends on fails.

install_operator_mn() {
  if in_node helm upgrade --install khorovod "$root/charts/khorovod" -n khorovod-system --create-namespace \
       --set-string 'nodeSelector.kubernetes\.io/hostname=khvc-n1' \
       --set operator.leaderElection.leaseDurationSeconds=6,operator.leaderElection.renewDeadlineSeconds=4,operator.leaderElection.retryPeriodSeconds=1 \
       --wait --timeout 180s > "$work/helm.log" 2>&1; then
    ok "helm install of the chart; the operator runs on khvc-n1"
  else
    fail "helm install"; cat "$work/helm.log"; k get pods -A -o wide; return 1
  fi
}

# scenario_spread: 3 workers x 2 slots on 3 nodes, local ranks counted by
# node (spec.localRanks: Node: the rendezvous counts by each worker's
# KHOROVOD_NODE_NAME); placement lines from every process; the job's step
# rate sizes the later jobs (MN_STEPS).
scenario_spread() {
  local ns=mn-spread job=spread
  new_ns "$ns"
  # Two slots per pod: khorovod-slots runs both, so no fixed metrics port.
  mjob "$job" 3 3 "${MULTINODE_SPREAD_STEPS:-400}" plain | sed -e 's/command: \[khorovod-example-trainer/command: [khorovod-slots, khorovod-example-trainer/' \
      -e '/^ *env:$/d' -e '/KHOROVOD_METRICS_PORT/d' |
    sed 's/^  worker:/  slotsPerWorker: 2\n  localRanks: Node\n  worker:/' | k apply -n "$ns" -f - >/dev/null
  expect "$job: 3 workers and the rendezvous Running" 180 at_least_running "$job" "$ns" 4 || { dump_job "$job" "$ns"; return 1; }
  local n; n=$(distinct_nodes "$job" "$ns")
  worker_nodes "$job" "$ns" | sed 's/^/  /'
  [ "$n" -eq 3 ] && ok "$job: the 3 workers run on 3 distinct nodes" || fail "$job: workers on $n distinct nodes, not 3"
  local tsc; tsc=$(jp pod "$job-worker-0" -n "$ns" -o jsonpath='{.spec.topologySpreadConstraints[0].topologyKey}')
  [ -n "$tsc" ] && ok "$job: the operator spreads workers by default (topologySpreadConstraints on $tsc)" \
    || fail "$job: no topologySpreadConstraints on a worker whose template has none (issue 30 operator feature: spread by default)"
  six() { [ "$(job_logs "$job" "$ns" | grep -c '^placement: ')" -ge 6 ]; }
  expect "$job: all 6 processes printed their placement" 120 six || { dump_job "$job" "$ns"; return 1; }
  local t0=$SECONDS s0; s0=$(last_step "$job" "$ns")
  check_placements "$job" "$ns"
  expect "$job: Succeeded" 600 phase_is "$job" "$ns" Succeeded || { dump_job "$job" "$ns"; return 1; }
  ranks_agree "$job" "$ns"
  local secs=$((SECONDS - t0)) steps=$(( ${MULTINODE_SPREAD_STEPS:-400} - ${s0:-0} ))
  [ "$secs" -gt 0 ] || secs=1
  echo "  $job: about $(( steps / secs )) steps/s at 3 nodes x 2 slots"
  k delete namespace "$ns" --wait=false >/dev/null
}

# Every process's local/cross rank and size against the nodes its pods run
# on: local_size = processes on that node, cross_size = nodes.
check_placements() {
  local job=$1 ns=$2 pod node bad=0 nodes lines
  nodes=$(distinct_nodes "$job" "$ns")
  while read -r pod node; do
    local on_node; on_node=$(( $(worker_nodes "$job" "$ns" | awk -v n="$node" '$2 == n' | wc -l) * 2 ))
    lines=$(k logs -n "$ns" "$pod" 2>/dev/null | grep '^placement: ' | head -2)
    while read -r line; do
      echo "  $pod on $node: $line"
      [ "$(field_of local_size "$line")" = "$on_node" ] && [ "$(field_of cross_size "$line")" = "$nodes" ] || bad=1
    done <<<"$lines"
  done < <(worker_nodes "$job" "$ns")
  [ $bad -eq 0 ] && ok "$job: local_size and cross_size follow the nodes (local_size = processes on the node, cross_size $nodes)" \
    || fail "$job: local/cross ranks do not follow the pods' nodes"
}
field_of() { sed -nE "s/.* $1 ([^ ]+).*/\1/p" <<<"$2"; }

# start_disruption_job NAME NS MIN SECONDS: a spread job that trains SECONDS
# (--train-seconds), running on 3 nodes with progress; prints nothing.
start_disruption_job() {
  local job=$1 ns=$2 secs=$4
  new_ns "$ns"
  mjob "$job" 3 "$3" 100000000 spread "$secs" | k apply -n "$ns" -f - >/dev/null
  expect "$job: 3 workers and the rendezvous Running (training ${secs}s)" 180 at_least_running "$job" "$ns" 4 || return 1
  expect "$job: training makes progress" 120 progress_past "$job" "$ns" 20 || return 1
}

# after_loss JOB NS NODE T0 LAST HOW T0_EPOCH: the checks after NODE stopped
# training at T0 (LAST: the last step seen before): survivors re-form, roll
# back nothing committed, the lost worker is replaced on another node within
# REPLACE_BOUND of T0 and joins the ring.
after_loss() {
  local job=$1 ns=$2 node=$3 t0=$4 last=$5 how=$6 t0_epoch=$7
  check_reform "$job" "$ns" "$last" "$t0_epoch" "$how"
  check_rollback "$job" "$ns" "$how"
  replaced() {
    [ "$(worker_nodes "$job" "$ns" | awk -v n="$node" '$2 != n' | wc -l)" -ge 3 ] && at_least_running "$job" "$ns" 4
  }
  local left=$((REPLACE_BOUND - (SECONDS - t0) + 5)) delay
  [ "$left" -gt 5 ] || left=5
  if wait_for "$left" replaced && delay=$(replacement_delay "$job" "$ns" "$node" "$t0_epoch") && [ "$delay" -le "$REPLACE_BOUND" ]; then
    ok "$job: the lost worker replaced on a healthy node, Ready ${delay}s after the $how (bound ${REPLACE_BOUND}s: node grace ${MN_MONITOR_GRACE}s + 5s + nodeLossTimeoutSeconds ${MN_NODE_LOSS_TIMEOUT}s + 15s to start)"
  else
    fail "$job: the lost worker not replaced on a healthy node within ${REPLACE_BOUND}s of the $how (${delay:-no replacement Ready}${delay:+s})"
    k get pods -n "$ns" -o wide | sed 's/^/  | /'
    k get events -n "$ns" --field-selector involvedObject.kind=HorovodJob | tail -8 | sed 's/^/  | /'
    return 1
  fi
  # It joins within a moment of being Ready: any ring of 3 resumed from a
  # commit at or after the loss is the one it joined.
  expect "$job: the replacement joined: ring re-formed at world 3 from a commit >= step $last" 60 reformed "$job" "$ns" 3 "$last"
}

# check_reform JOB NS LAST T0_EPOCH WHAT [WORLDS]: the survivors re-formed a
# ring of a size in WORLDS (default 2) from a commit >= LAST within
# REFORM_BOUND of T0_EPOCH, timed by rank 0's own log line (the kubelet's
# time stamp), not by this script's polling. An eviction passes "2 3": its
# replacement can be Ready before the survivors' rendezvous closes, and then
# the first ring after it is already whole again.
check_reform() {
  local job=$1 ns=$2 last=$3 what=$5 worlds=${6:-2} delay world
  first_world() {
    world=$(resumes "$job" "$ns" | awk -v s="$last" -v w=" $worlds " '$2 >= s && index(w, " " $1 " ") {print $1; exit}')
    [ -n "$world" ]
  }
  if ! wait_for $((REFORM_BOUND + 90)) first_world; then  # wait_for runs first_world here: it sets world
    fail "$job: no ring of ${worlds// / or } re-formed from a commit >= step $last after the $what: $(resumes "$job" "$ns" | tr '\n' ';')"; return 1
  fi
  delay=$(reform_delay "$job" "$ns" "$world" "$last" "$4") || { fail "$job: rank 0's re-formed line has no time stamp"; return 1; }
  local from; from=$(first_resume "$job" "$ns" "$world" "$last")
  if awk -v d="$delay" -v b="$REFORM_BOUND" 'BEGIN {exit !(d <= b)}'; then
    ok "$job: survivors re-formed (world $world) ${delay}s after the $what (bound ${REFORM_BOUND}s), from committed step $from (last step seen before: $last; no committed step lost)"
  else
    fail "$job: survivors re-formed only ${delay}s after the $what (bound ${REFORM_BOUND}s, the heartbeat bound; from committed step $from)"
    survivor_lines "$job" "$ns"
  fi
}

# survivor_lines JOB NS: each running worker's own time-stamped runtime lines
# (khorovod's, not the step lines), the last 12: where a slow re-form waited.
survivor_lines() {
  local p
  for p in $(pods_up "khorovod.dev/job-name=$1,khorovod.dev/role=worker" "$2"); do
    echo "  $p:"
    k logs -n "$2" "$p" --timestamps 2>/dev/null | grep -v ' step [0-9]' | tail -12 | cut -c1-250 | sed 's/^/  | /'
  done
}

# check_rollback JOB NS WHAT: the survivors' own count of steps rolled back
# (khorovod_worker_steps_rolled_back_total): only uncommitted work, at most
# one step per worker per failure, since the trainer commits every step;
# and the recovery's phases as the workers measured them.
check_rollback() {
  local job=$1 ns=$2 what=$3 m
  m=$(worker_metrics "$job" "$ns" 'khorovod_worker_steps_rolled_back_total|khorovod_worker_recovery_phase_seconds_sum')
  if ! grep -q steps_rolled_back_total <<<"$m"; then
    fail "$job: the workers export no khorovod_worker_steps_rolled_back_total (issue 30 runtime feature: goodput and recovery metrics)"; return 1
  fi
  echo "$m" | sed 's/^/  metrics: /'
  local worst; worst=$(awk '$2 ~ /^khorovod_worker_steps_rolled_back_total/ && $3 > w {w = $3} END {print w + 0}' <<<"$m")
  local failures; failures=$(resumes "$job" "$ns" | wc -l)
  awk -v w="$worst" -v f="$failures" 'BEGIN {exit !(w <= f)}' \
    && ok "$job: after the $what a worker rolled back at most $worst step(s) ($failures re-formed rings: nothing committed lost)" \
    || fail "$job: a worker rolled back $worst steps over $failures re-formed rings (more than the uncommitted step each)"
}

# finish_job JOB NS MIN SAMPLES T0 [FULL_BOUND]: Succeeded, the ranks agree,
# never below MIN workers longer than REPLACE_BOUND; with FULL_BOUND, never
# short of the 3 workers longer than that either (a node-loss job: the time
# from the loss to the replacement).
finish_job() {
  local job=$1 ns=$2
  expect "$job: Succeeded" 600 phase_is "$job" "$ns" Succeeded || { dump_job "$job" "$ns"; return 1; }
  ranks_agree "$job" "$ns"
  local below; below=$(longest_below "$4" "$3" "$5")
  [ "$below" -le "$REPLACE_BOUND" ] && ok "$job: below minReplicas ($3) for at most ${below}s (bound ${REPLACE_BOUND}s)" \
    || fail "$job: below minReplicas ($3) for ${below}s, longer than ${REPLACE_BOUND}s"
  local short; short=$(longest_below "$4" 3 "$5")
  if [ -n "${6:-}" ]; then
    [ "$short" -le "$6" ] && ok "$job: short of its 3 workers for at most ${short}s at a stretch (bound ${6}s)" \
      || fail "$job: short of its 3 workers for ${short}s at a stretch, longer than ${6}s"
  else
    echo "  $job: short of 3 workers for at most ${short}s at a stretch"
  fi
  k delete namespace "$ns" --wait=false >/dev/null
}

scenario_node_kill() { node_loss_scenario mn-kill kill crash; }
scenario_net_cut() { node_loss_scenario mn-cut cut "network cut"; }

# A node crashed or cut mid-training: the job trains MULTINODE_LOSS_JOB_SECS
# (default 100 s: the disruption comes about 10 s in, the replacement within
# REPLACE_BOUND, then it trains at world 3 again).
node_loss_scenario() {
  local ns=$1 job=$2 how=$3 samples="$work/samples-$2.txt"
  start_disruption_job "$job" "$ns" 2 "${MULTINODE_LOSS_JOB_SECS:-100}" || { dump_job "$job" "$ns"; return 1; }
  local node; node=$(victim_node "$job" "$ns")
  [ -n "$node" ] || { fail "$job: no node other than khvc-n1 runs a worker without the rendezvous"; dump_job "$job" "$ns"; return 1; }
  start_sampler "$job" "$ns" "$samples"
  local last t0 t0_epoch i; i=$(node_index "$node"); last=$(last_step "$job" "$ns"); t0=$SECONDS; t0_epoch=$(date +%s.%N)
  if [ "$how" = crash ]; then real_node node-stop "$i" && mark_down "$node"
  else real_node net-cut "$i" && mark_down "$node"; fi
  ok "$job: $how of $node ($(worker_on "$job" "$ns" "$node") there) after step $last"
  after_loss "$job" "$ns" "$node" "$t0" "$last" "$how" "$t0_epoch"
  if [ "$how" = crash ]; then real_node node-start "$i"; else real_node net-restore "$i"; fi
  mark_up "$node"
  expect "$node Ready again after the $how ended" 120 eval "[ \"\$(jp node $node -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
  finish_job "$job" "$ns" 2 "$samples" "$t0" "$REPLACE_BOUND"
  stop_sampler
}

# follow_logs POD NS FILE: the pod's own output until it ends (its last words
# survive the pod object, which an eviction deletes).
follow_logs() { k logs -f -n "$2" "$1" --request-timeout=0 > "$3" 2>&1 & follow_pid=$!; }

# One job through a drain, a preemption, a scale-down with a drain the
# PodDisruptionBudget must block, and a scale-up.
scenario_evictions() {
  local ns=mn-evict job=evict samples="$work/samples-evict.txt"
  start_disruption_job "$job" "$ns" 2 "${MULTINODE_EVICT_JOB_SECS:-150}" || { dump_job "$job" "$ns"; return 1; }
  local pdb; pdb=$(jp pdb -n "$ns" -l "khorovod.dev/job-name=$job" -o jsonpath='{.items[0].spec.minAvailable}')
  [ "$pdb" = 2 ] && ok "$job: a PodDisruptionBudget keeps minAvailable at minReplicas (2)" \
    || fail "$job: no PodDisruptionBudget with minAvailable 2 (issue 30 operator feature: PDB at minReplicas); found '$pdb'"
  start_sampler "$job" "$ns" "$samples"
  local t_start=$SECONDS
  evict_by drain "$job" "$ns" || { stop_sampler; dump_job "$job" "$ns"; return 1; }
  evict_by preemption "$job" "$ns" || { stop_sampler; dump_job "$job" "$ns"; return 1; }
  scale_down_blocked_drain "$job" "$ns" || { stop_sampler; dump_job "$job" "$ns"; return 1; }
  finish_job "$job" "$ns" 2 "$samples" "$t_start"
  stop_sampler
}

# evict_by drain|preemption JOB NS: one worker evicted through the eviction
# API (kubectl drain) or preempted by a higher-priority pod; it leaves at a
# step boundary, and is replaced on another node.
evict_by() {
  local how=$1 job=$2 ns=$3 node pod cpu last t0 t0_epoch
  if [ "$how" = drain ]; then
    # A node with one worker of the job: a drain evicts all of them there.
    node=$(single_worker_node "$job" "$ns")
    [ -n "$node" ] || node=$(victim_node "$job" "$ns")
    pod=$(worker_on "$job" "$ns" "$node")
    [ -n "$pod" ] || { fail "$job: no worker to drain"; return 1; }
  else
    within_budget "$job" "$ns" || return 1
    local plan
    has_plan() { plan=$(preemption_plan "$job" "$ns" "$MN_PREEMPTOR_PRIORITY"); }
    if ! wait_for 60 has_plan; then  # wait_for runs has_plan here: it sets plan
      fail "$job: no node where one worker alone makes room for a preemptor"; worker_nodes "$job" "$ns" | sed 's/^/  | /'; return 1
    fi
    read -r node pod cpu <<<"$plan"
  fi
  follow_logs "$pod" "$ns" "$work/$job-$how-$pod.log"
  last=$(last_step "$job" "$ns"); t0=$SECONDS; t0_epoch=$(date +%s.%N)
  if [ "$how" = drain ]; then drain_worker "$job" "$ns" "$node" "$pod" || return 1
  else preempt_worker "$job" "$ns" "$node" "$pod" "$cpu" || return 1; fi
  # The evicted process's last output reaches its log follower within a
  # moment; wait for that line (bounded) rather than a fixed time.
  wait_for 15 grep -q 'left the job at a commit' "$work/$job-$how-$pod.log"
  grep -q 'left the job at a commit' "$work/$job-$how-$pod.log" && ok "$job: $pod left at a step boundary: $(grep 'left the job at a commit' "$work/$job-$how-$pod.log" | tail -1)" \
    || fail "$job: $pod printed no graceful leave (issue 30 runtime feature: an evicted worker leaves at a step boundary); its last line: $(tail -1 "$work/$job-$how-$pod.log")"
  check_reform "$job" "$ns" "$last" "$t0_epoch" "$how" "2 3"
  check_rollback "$job" "$ns" "$how"
  elsewhere() { [ "$(worker_nodes "$job" "$ns" | awk -v n="$node" '$2 != n' | wc -l)" -ge 3 ] && at_least_running "$job" "$ns" 4; }
  expect "$job: $pod replaced on another node after the $how (within ${REPLACE_BOUND}s)" "$REPLACE_BOUND" elsewhere
  local ready; ready=$(replacement_delay "$job" "$ns" "$node" "$t0_epoch")
  echo "  $job: $how recovered in $((SECONDS - t0))s (the replacement Ready ${ready:-?}s after the $how)"
  if [ "$how" = drain ]; then k uncordon "$node" >/dev/null; else k delete pod preemptor -n "$ns" --wait=false >/dev/null; fi
  kill "$follow_pid" 2>/dev/null || true
}

drain_worker() {  # job ns node pod
  local t0=$SECONDS
  if k drain "$3" --ignore-daemonsets --delete-emptydir-data --pod-selector "khorovod.dev/job-name=$1,khorovod.dev/role=worker" \
       --timeout 120s > "$work/drain-$3.log" 2>&1; then
    ok "$1: kubectl drain $3 evicted $4 through the eviction API in $((SECONDS - t0))s"
  else fail "$1: kubectl drain $3 failed: $(tail -3 "$work/drain-$3.log" | tr '\n' ' ')"; k uncordon "$3" >/dev/null; return 1; fi
}

# within_budget JOB NS: the PodDisruptionBudget allows one disruption (the
# drained worker's replacement is Ready). The scheduler's preemption honours
# a PDB only as a preference (it picks victims that do not violate one when
# it can, and preempts anyway when it cannot), so the scenario preempts
# within the budget, as an operator of a cluster would expect it to.
within_budget() {
  allowed() { [ "$(jp pdb -n "$2" -l "khorovod.dev/job-name=$1" -o jsonpath='{.items[0].status.disruptionsAllowed}')" -ge 1 ]; }
  expect "$1: the PodDisruptionBudget allows one disruption again before the preemption" 90 allowed "$1" "$2"
}

# preempt_worker JOB NS NODE POD CPU: a pod of higher priority, pinned to
# NODE and asking for CPU (preemption_plan), runs; the scheduler preempted
# POD and no other pod: its Preempted events name POD alone, and the job's
# other workers are all still there.
preempt_worker() {
  local job=$1 ns=$2 node=$3 pod=$4 cpu=$5 others o gone=""
  others=$(worker_nodes "$job" "$ns" | awk -v p="$pod" '$1 != p {print $1}')
  k apply -f - >/dev/null <<YAML
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: mn-preemptor}
value: $MN_PREEMPTOR_PRIORITY
description: the multi-node stage's preempting pod
---
apiVersion: v1
kind: Pod
metadata: {name: preemptor, namespace: $ns}
spec:
  priorityClassName: mn-preemptor
  terminationGracePeriodSeconds: 1
  nodeSelector: {kubernetes.io/hostname: $node}
  containers:
  - name: hold
    image: ghcr.io/khorovod/khorovod-runtime:0.1.0
    command: [sleep, "3600"]
    resources: {requests: {cpu: $cpu, memory: 16Mi}}
YAML
  preempted() { [ "$(jp pod preemptor -n "$ns" -o jsonpath='{.status.phase}')" = Running ]; }
  expect "$job: a higher-priority pod asking for $cpu CPU on $node preempted $pod and runs" 120 preempted || return 1
  local victims; victims=$(k get events -n "$ns" --field-selector reason=Preempted -o jsonpath='{range .items[*]}{.involvedObject.name}{"\n"}{end}' | sort -u)
  # A pod still there and not being deleted prints its name alone.
  for o in $others; do
    [ "$(jp pod "$o" -n "$ns" -o jsonpath='{.metadata.name}{.metadata.deletionTimestamp}')" = "$o" ] || gone+=" $o"
  done
  [ "$victims" = "$pod" ] && [ -z "$gone" ] && ok "$job: the scheduler preempted exactly $pod (its Preempted events name it alone; the other workers $(tr '\n' ' ' <<<"$others")still run)" \
    || fail "$job: the preemption took more or other than $pod: Preempted events for '$(tr '\n' ' ' <<<"$victims")'; other workers gone:${gone:- none}"
}

# Scaled down to minReplicas, the job allows no disruption: a drain of a
# worker's node is refused by the PodDisruptionBudget. Then scaled up again.
scale_down_blocked_drain() {
  local job=$1 ns=$2 last; last=$(last_step "$job" "$ns")
  k scale hvdjob "$job" -n "$ns" --replicas 2 >/dev/null && ok "kubectl scale hvdjob $job --replicas 2"
  expect "$job: re-formed at world 2 after the scale-down" 90 reformed "$job" "$ns" 2 "$last" || return 1
  two_workers() { [ "$(worker_nodes "$job" "$ns" | wc -l)" -eq 2 ]; }
  expect "$job: 2 worker pods after the scale-down" 60 two_workers
  local node; node=$(worker_nodes "$job" "$ns" | awk '$2 != "khvc-n1" {print $2; exit}')
  [ -n "$node" ] || node=khvc-n1
  if k drain "$node" --ignore-daemonsets --delete-emptydir-data --pod-selector "khorovod.dev/job-name=$job,khorovod.dev/role=worker" \
       --timeout 20s > "$work/drain-blocked.log" 2>&1; then
    fail "$job: at minReplicas, kubectl drain $node evicted a worker (the PodDisruptionBudget should refuse; issue 30 operator feature)"
  else
    grep -q 'disruption budget' "$work/drain-blocked.log" && ok "$job: at minReplicas the PodDisruptionBudget refused the drain of $node" \
      || fail "$job: the drain of $node failed, but not for the disruption budget: $(tail -2 "$work/drain-blocked.log" | tr '\n' ' ')"
  fi
  k uncordon "$node" >/dev/null
  last=$(last_step "$job" "$ns")
  k scale hvdjob "$job" -n "$ns" --replicas 3 >/dev/null && ok "kubectl scale hvdjob $job --replicas 3"
  expect "$job: re-formed at world 3 after the scale-up" 120 reformed "$job" "$ns" 3 "$last"
}
