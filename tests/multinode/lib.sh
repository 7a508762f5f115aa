#!/usr/bin/env bash
# shellcheck disable=SC2034,SC2154  # sets what the scenarios read; root, work, here: set by the sourcing script
# Helpers of the multi-node scenarios (sourced by tests/multinode/scenarios.sh):
# the job manifest, where a job's pods run, the victim node of a disruption,
# the workers' own step lines, and a sampler of how many workers really run.
# Expects lib.sh and scenarios.sh of tests/realnode sourced, cluster_script set.

MN_NODES=${KHOROVOD_CLUSTER_NODES:-3}
# The bounds the scenarios assert (seconds), and why:
# survivors re-form within the heartbeat bound (issue 30): the jobs'
# heartbeat timeout (3 s) and settle (0.3 s), plus a new ring's setup on a
# loaded 2-core machine;
REFORM_BOUND=${MULTINODE_REFORM_BOUND:-15}
# a lost worker is replaced on a healthy node within: the node controller's
# grace for a silent kubelet (scripts/real-cluster.sh, 30 s here) counted
# from the last lease renewal, plus its 5 s monitor period, plus the job's
# nodeLossTimeoutSeconds (MN_NODE_LOSS_TIMEOUT), plus the replacement's
# creation, scheduling and container start (15 s on a loaded 2-core machine):
# 60 s, well before the 300 s taint eviction (issue 30: "without waiting for
# the default 5-minute taint eviction"). Evicted and preempted workers are
# replaced within the same bound.
MN_NODE_LOSS_TIMEOUT=10
MN_MONITOR_GRACE=${KHOROVOD_CLUSTER_NODE_MONITOR_GRACE:-30s}
MN_MONITOR_GRACE=${MN_MONITOR_GRACE%s}
REPLACE_BOUND=${MULTINODE_REPLACE_BOUND:-$((MN_MONITOR_GRACE + 5 + MN_NODE_LOSS_TIMEOUT + 15))}
# The preemption scenario's PriorityClass: above the jobs' (0), below the
# add-ons' system-cluster-critical, so CoreDNS is never a victim.
MN_PREEMPTOR_PRIORITY=1000000

# mjob NAME REPLICAS MIN STEPS spread|plain [SECONDS]: the job manifest; with
# SECONDS the trainer stops after that much training (--train-seconds), STEPS
# is then only a cap.
mjob() {
  local spread=""
  [ "$5" = spread ] && spread='topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {khorovod.dev/job-name: '"$1"', khorovod.dev/role: worker}}}]'
  sed -e "s/NAME/$1/" -e "s/REPLICAS/$2/g" -e "s/MIN$/$3/" -e "s/STEPS/$4/" -e "s|SPREAD|$spread|" \
      -e "s/TRAIN_SECONDS/${6:-0}/" -e "s/NODE_LOSS_TIMEOUT/$MN_NODE_LOSS_TIMEOUT/" "$here/job.yaml"
}
new_ns() { k create namespace "$1" >/dev/null; wait_for 30 k get serviceaccount default -n "$1"; }
node_index() { echo "${1##*-n}"; }
# pods_up SELECTOR NS [FIELD_SELECTOR]: the names of the pods matching, but
# not those on a node marked down (mark_down): the API server's reads of a
# cut node's kubelet (logs, the pod proxy) wait for their timeout, which
# would slow every poll of the survivors.
pods_up() {
  local p node down; down=" $(cat "$work/down-nodes" 2>/dev/null | tr '\n' ' ') "
  while read -r p node; do
    [ -n "$p" ] && [[ $down != *" $node "* ]] && echo "$p"
  done < <(k get pods -n "$2" -l "$1" ${3:+--field-selector "$3"} \
             -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.nodeName}{"\n"}{end}' 2>/dev/null)
  return 0
}
# job_logs (tests/realnode/lib.sh) without the pods of nodes marked down.
job_logs() {  # job ns
  local p
  for p in $(pods_up "khorovod.dev/job-name=$1" "$2"); do k logs -n "$2" "$p" --all-containers 2>/dev/null; done
  return 0
}
# "POD NODE" for each worker pod (not deleting) of a job.
worker_nodes() {
  k get pods -n "$2" -l "khorovod.dev/job-name=$1,khorovod.dev/role=worker" \
    -o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name}{" "}{.spec.nodeName}{"\n"}{end}'
}
rdv_node() {
  k get pods -n "$2" -l "khorovod.dev/job-name=$1,khorovod.dev/role=rendezvous" -o jsonpath='{.items[0].spec.nodeName}'
}
# victim_node JOB NS: a node other than khvc-n1 (the add-ons' node) that runs
# a worker of the job and not its rendezvous server.
victim_node() {
  local rdv; rdv=$(rdv_node "$1" "$2")
  worker_nodes "$1" "$2" | awk -v rdv="$rdv" '$2 != rdv && $2 != "khvc-n1" {print $2}' | sort | head -1
}
# single_worker_node JOB NS: a node other than khvc-n1 and the rendezvous'
# that runs exactly one worker of the job (a preemption there has one victim).
single_worker_node() {
  local rdv; rdv=$(rdv_node "$1" "$2")
  worker_nodes "$1" "$2" | awk '{print $2}' | sort | uniq -c |
    awk -v rdv="$rdv" '$1 == 1 && $2 != rdv && $2 != "khvc-n1" {print $2}' | head -1
}
worker_on() { worker_nodes "$1" "$2" | awk -v n="$3" '$2 == n {print $1; exit}'; }
distinct_nodes() { worker_nodes "$1" "$2" | awk '{print $2}' | sort -u | wc -l; }
# The highest step rank 0 has logged, and the committed steps it resumed from.
last_step() { job_logs "$1" "$2" | sed -nE 's/^step +([0-9]+)\/.*/\1/p' | sort -n | tail -1; }
# first_resume JOB NS WORLD AFTER_STEP: the committed step of the first such re-formed ring.
first_resume() { resumes "$1" "$2" | awk -v w="$3" -v s="$4" '$1 == w && $2 >= s {print $2; exit}'; }
resumes() { job_logs "$1" "$2" | sed -nE 's/^ring re-formed: world size ([0-9]+); resuming from committed step ([0-9]+)/\1 \2/p'; }
# reformed_without JOB NS WORLD AFTER_STEP: rank 0 re-formed a ring of WORLD
# resuming from a commit >= AFTER_STEP.
reformed() { resumes "$1" "$2" | awk -v w="$3" -v s="$4" '$1 == w && $2 >= s {f = 1} END {exit !f}'; }
# reform_delay JOB NS WORLD AFTER_STEP T0: seconds from T0 (epoch seconds) to
# the time stamp the kubelet gave rank 0's first such "ring re-formed" line.
reform_delay() {
  local p stamp
  for p in $(pods_up "khorovod.dev/job-name=$1,khorovod.dev/role=worker" "$2"); do
    stamp=$(k logs -n "$2" "$p" --timestamps 2>/dev/null |
      awk -v w="$3" -v s="$4" '$2 == "ring" && $3 == "re-formed:" && $6 == w";" && $NF >= s {print $1; exit}')
    [ -n "$stamp" ] && break
  done
  [ -n "$stamp" ] || return 1
  python3 -c 'import sys, datetime as d; t = d.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")[:26] + "+00:00"); print(f"{t.timestamp() - float(sys.argv[2]):.1f}")' "$stamp" "$5"
}
progress_past() { local s; s=$(last_step "$1" "$2"); [ -n "$s" ] && [ "$s" -ge "$3" ]; }

# A sampler: every second, how many of the job's workers are Running and
# Ready (or have finished training: Succeeded), not being deleted, and not
# on a node listed in $work/down-nodes
# (the API still shows a crashed node's pods Running for a while; they do
# not train). One "SECONDS COUNT" line per sample.
sample_workers() {  # job ns out
  local end=$((SECONDS + 1800)) bad n
  while [ $SECONDS -lt $end ]; do
    bad=$(cat "$work/down-nodes" 2>/dev/null | tr '\n' ' ')
    n=$(k get pods -n "$2" -l "khorovod.dev/job-name=$1,khorovod.dev/role=worker" \
          -o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{.status.phase}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null |
        awk -v bad=" $bad " '($2 == "Running" && $3 == "True" || $2 == "Succeeded") && $4 == "" && index(bad, " " $1 " ") == 0 {n++} END {print n + 0}')
    echo "$SECONDS $n" >> "$3"
    sleep 1
  done
}
start_sampler() { : > "$work/down-nodes"; : > "$3"; sample_workers "$@" & sampler_pid=$!; }
stop_sampler() { kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null; }
# longest_below FILE N FROM: the longest run of seconds (from FROM on) with fewer than N workers.
longest_below() {
  awk -v n="$2" -v from="$3" '$1 >= from { if ($2 < n) { if (start == "") start = prev == "" ? $1 : prev; len = $1 - start; if (len > best) best = len } else start = ""; prev = $1 } END {print best + 0}' "$1"
}
mark_down() { echo "$1" >> "$work/down-nodes"; }
mark_up() { sed -i "/^$1\$/d" "$work/down-nodes"; }

# preemption_plan JOB NS PRIORITY: "NODE POD CPU": the node where a pod of
# PRIORITY asking for CPU can only run by preempting POD, its one worker of
# the job, and nothing else (tests/multinode/preemption_plan.py says why).
preemption_plan() {
  local pods nodes rc
  pods=$(mktemp) nodes=$(mktemp)
  k get pods -A -o json > "$pods" && k get nodes -o json > "$nodes" &&
    python3 "$here/preemption_plan.py" "$pods" "$nodes" "$1" "$2" "$3"
  rc=$?
  rm -f "$pods" "$nodes"
  return $rc
}

# The workers' own metrics (KHOROVOD_METRICS_PORT 9400), through the API
# server's pod proxy: "POD NAME{LABELS} VALUE" for the metrics matching REGEX.
worker_metrics() {  # job ns regex
  local p
  # Bounded: the survivors may finish meanwhile.
  for p in $(pods_up "khorovod.dev/job-name=$1,khorovod.dev/role=worker" "$2" status.phase=Running); do
    k get --raw "/api/v1/namespaces/$2/pods/$p:9400/proxy/metrics" --request-timeout=5s 2>/dev/null |
      grep -E "^($3)" | sed "s|^|$p |"
  done
}

# replacement_delay JOB NS NODE T0_EPOCH: seconds from T0_EPOCH to the Ready
# time (the kubelet's, whole seconds) of the last worker created after T0 on
# a node other than NODE; fails when there is none yet.
replacement_delay() {
  k get pods -n "$2" -l "khorovod.dev/job-name=$1,khorovod.dev/role=worker" \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{.metadata.creationTimestamp}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.status.conditions[?(@.type=="Ready")].lastTransitionTime}{"\n"}{end}' |
    python3 -c '
import sys, datetime as d
node, t0 = sys.argv[1], float(sys.argv[2])
ts = lambda s: d.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
best = None
for line in sys.stdin:
    f = line.split()
    if len(f) == 4 and f[0] != node and f[2] == "True" and ts(f[1]) >= int(t0):
        best = max(best or 0, ts(f[3]) - t0)
sys.exit(1) if best is None else print(f"{best:.0f}")' "$3" "$4"
}
