#!/usr/bin/env bash
# The user's whole story on Kubernetes, on one machine:
#   the real API server, etcd, scheduler and controller-manager (fixture k8s),
#   the operator installed with `helm install` and running as a pod, and the
#   test node agent (tests/e2e/node_agent) playing the kubelet.
# 1. kubectl apply a HorovodJob (CPU, 4 workers, min 2, max 4) running the
#    example trainer; pods are scheduled and Running; training progresses.
# 2. kubectl delete pod one worker mid-training: the ring re-forms without
#    it, the operator replaces it, and the replacement joins.
# 3. kubectl scale hvdjob down to 3 and back up to 4 during training.
# 4. The job reaches Succeeded; every rank that finished agrees on the
#    parameters and the loss fell; status and events tell the story.
# Usage: e2e_test.sh CLUSTER_DIR BIN_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=${1:?cluster dir}; bin=${2:?bin dir}
set -a; source "$cluster/env"; set +a
work=$(mktemp -d /tmp/khorovod-e2e.XXXXXX)
agent_pid=""; poll_pid=""
ns=e2e; job=mlp-e2e; steps=${E2E_STEPS:-6000}
k() { "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG" --request-timeout=30s "$@"; }
cleanup() {
  [ -n "$poll_pid" ] && kill "$poll_pid" 2>/dev/null
  "$K8S_BIN/helm" --kubeconfig "$KUBECONFIG" uninstall khorovod-e2e -n khorovod-e2e >/dev/null 2>&1
  k delete namespace "$ns" khorovod-e2e --wait=false >/dev/null 2>&1
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  k delete node khorovod-e2e-node >/dev/null 2>&1
  [ "${failed:-1}" -eq 0 ] && rm -rf "$work" || echo "e2e: logs kept in $work"
}
trap cleanup EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
wait_for() {  # seconds command...
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [ $SECONDS -ge $deadline ] && return 1; sleep 0.2; done
}
# A failed step ends the scenario: the later ones depend on it.
expect() { local what=$1 secs=$2; shift 2; if wait_for "$secs" "$@"; then ok "$what"; else fail "$what"; finish; fi; }
finish() {
  echo "e2e: $passed passed, $failed failed"
  if [ "$failed" -ne 0 ]; then
    echo "---- node agent"; tail -40 "$work/node-agent.log"
    echo "---- operator"; cat "$work/pods/khorovod-e2e_"*.log 2>/dev/null | tail -40
    echo "---- workers"; all_logs | grep -v '^step' | tail -30
    echo "---- pods"; k get pods -A -o wide 2>&1 | tail -20
  fi
  exit $(( failed == 0 ? 0 : 1 ))
}
log_of() { cat "$work/pods/${ns}_$1.log" 2>/dev/null; }
all_logs() { cat "$work/pods/${ns}_${job}-worker-"*.log 2>/dev/null; }

"$bin/khorovod-test-node-agent" --kubeconfig "$KUBECONFIG" --bin-dir "$bin" --log-dir "$work/pods" \
  --image-command khorovod-local/operator=khorovod-operator --grace-seconds 3 > "$work/node-agent.log" 2>&1 &
agent_pid=$!

# The operator, from the chart, as a pod on the agent's node.
if "$K8S_BIN/helm" --kubeconfig "$KUBECONFIG" install khorovod-e2e "$root/charts/khorovod" -n khorovod-e2e \
     --create-namespace --set image.repository=khorovod-local/operator \
     --set operator.leaderElection.leaseDurationSeconds=4,operator.leaderElection.renewDeadlineSeconds=3,operator.leaderElection.retryPeriodSeconds=1 \
     --set-json 'tolerations=[{"key":"khorovod.dev/e2e","operator":"Exists","effect":"NoSchedule"}]' > "$work/helm.log" 2>&1
then ok "helm install"; else fail "helm install"; cat "$work/helm.log"; fi
operator_ready() { k get pods -n khorovod-e2e -l app.kubernetes.io/name=khorovod -o jsonpath='{.items[0].status.phase}' | grep -q Running; }
expect "operator pod Running on the node agent" 60 operator_ready

k create namespace "$ns" >/dev/null
wait_for 30 k get serviceaccount default -n "$ns"
sed "s/STEPS/$steps/" "$root/tests/e2e/horovodjob-e2e.yaml" | k apply -n "$ns" -f - >/dev/null
# Record every phase the job shows (a watch sees every status write), for
# the status-history assertions.
"$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG" get hvdjob "$job" -n "$ns" --watch --request-timeout=0 \
  -o jsonpath='{.status.phase}{"\n"}' > "$work/phases.txt" 2>/dev/null &
poll_pid=$!

running_pods() { k get pods -n "$ns" -l "khorovod.dev/job-name=$job" --field-selector status.phase=Running --no-headers | wc -l; }
five_running() { [ "$(running_pods)" -ge 5 ]; }
expect "4 workers and the rendezvous pod scheduled and Running" 60 five_running
# Rank 0 (whichever worker registered first) logs progress.
progress() { all_logs | grep -qE '^step +(3|4|5|6|7|8|9)00/'; }
expect "training makes progress (step 300 logged)" 120 progress
# The scraped metrics show progress: a worker's steps counter grows.
steps_of() { local ip; ip=$(k get pod "$job-worker-$1" -n "$ns" -o jsonpath='{.status.podIP}'); curl -sf "http://$ip:29500/metrics" | sed -nE 's/^khorovod_worker_steps_total(\{[^}]*\})? ([0-9.e+]+)$/\2/p' | head -1; }
s1=$(steps_of 2); sleep 1; s2=$(steps_of 2)
if [ -n "$s1" ] && [ -n "$s2" ] && awk -v a="$s1" -v b="$s2" 'BEGIN { exit !(b > a && a > 0) }'; then
  ok "worker metrics show progress (khorovod_worker_steps_total $s1 -> $s2)"
else fail "worker metrics show no progress ('$s1' -> '$s2')"; finish; fi
rdv_ip=$(k get pod "$job-rendezvous" -n "$ns" -o jsonpath='{.status.podIP}')
rdv_metrics() { curl -sf "http://$rdv_ip:29401/metrics" | grep -q '^khorovod_rendezvous_generation'; }
expect "rendezvous metrics served on its metrics port" 10 rdv_metrics
phase_running() { [ "$(k get hvdjob "$job" -n "$ns" -o jsonpath='{.status.phase}')" = Running ]; }
expect "job Running with 4 ready workers" 30 phase_running

# 2. Lose a worker. The survivors re-form, without it or (if its
# replacement registers first) with the replacement, and resume from the
# last commit; the rendezvous log shows each generation's members.
rdv_log() { log_of "$job-rendezvous"; }
generations() { rdv_log | grep -E 'generation [0-9]+ formed'; }
reformations() { all_logs | grep -c 'ring re-formed'; }
before=$(reformations)
old_uid=$(k get pod "$job-worker-1" -n "$ns" -o jsonpath='{.metadata.uid}')
k delete pod "$job-worker-1" -n "$ns" --wait=false >/dev/null && ok "kubectl delete pod $job-worker-1"
reformed() { [ "$(reformations)" -gt "$before" ]; }
expect "the ring re-formed after the worker was deleted, from a committed step" 60 reformed
replaced() { local u; u=$(k get pod "$job-worker-1" -n "$ns" -o jsonpath='{.metadata.uid}{" "}{.status.phase}'); [ -n "$u" ] && [ "${u% *}" != "$old_uid" ] && [ "${u#* }" = Running ]; }
expect "the operator replaced the worker and it runs" 60 replaced
new_ip=$(k get pod "$job-worker-1" -n "$ns" -o jsonpath='{.status.podIP}')
rejoined() { rdv_log | grep -q "registered worker '$job-worker-1' at $new_ip" && [ "$(generations | tail -1 | grep -o "$job-worker-" | wc -l)" -eq 4 ] && generations | tail -1 | grep -q "$job-worker-1"; }
expect "the replacement joined a generation of 4 at a commit" 90 rejoined

generation_at_least() { local g; g=$(k get hvdjob "$job" -n "$ns" -o jsonpath='{.status.rendezvousGeneration}'); [ -n "$g" ] && [ "$g" -ge "$1" ]; }
expect "status.rendezvousGeneration shows the re-formation (>= 2)" 40 generation_at_least 2

# 3. Scale down and up during training.
k scale hvdjob "$job" -n "$ns" --replicas 3 >/dev/null && ok "kubectl scale --replicas 3"
members() { [ "$(generations | tail -1 | grep -o "$job-worker-" | wc -l)" -eq "$1" ]; }
expect "a generation of 3 formed after scale-down" 90 members 3
gone3() { ! k get pod "$job-worker-3" -n "$ns" >/dev/null 2>&1; }
expect "the highest index (worker-3) was removed" 60 gone3
k scale hvdjob "$job" -n "$ns" --replicas 4 >/dev/null && ok "kubectl scale --replicas 4"
expect "a generation of 4 formed after scale-up" 90 members 4
resumed() { all_logs | grep -qE 'ring re-formed: world size [234]; resuming from committed step [1-9][0-9]*'; }
expect "workers resumed from committed steps" 5 resumed

# 4. Success.
succeeded() { [ "$(k get hvdjob "$job" -n "$ns" -o jsonpath='{.status.phase}')" = Succeeded ]; }
expect "job Succeeded" 240 succeeded
agree=$(all_logs | sed -nE 's/^all ([0-9]+) ranks agree on the parameters/\1/p' | tail -1)
sums=$(all_logs | sed -nE 's/^rank [0-9]+ parameters checksum ([0-9a-f]+)/\1/p' | sort -u)
if [ -n "$agree" ] && [ "$(wc -l <<<"$sums")" -eq 1 ]; then ok "all $agree final ranks agree on the parameters ($sums)"
else fail "ranks disagree or did not finish: agree='$agree' checksums=$(echo $sums)"; fi
read -r final initial < <(all_logs | sed -nE 's/^final loss ([0-9.]+) \(initial ([0-9.]+)\).*/\1 \2/p' | tail -1)
if [ -n "${final:-}" ] && awk -v f="$final" -v i="$initial" 'BEGIN { exit !(f < 0.7 * i) }'; then
  ok "loss fell from $initial to $final"; else fail "loss did not fall enough (${initial:-?} -> ${final:-?})"; fi
kill "$poll_pid" 2>/dev/null; wait "$poll_pid" 2>/dev/null; poll_pid=""
k get hvdjob "$job" -n "$ns" -o jsonpath='{.status.phase}{"\n"}' >> "$work/phases.txt"
history=$(uniq "$work/phases.txt" | grep -v '^$' | tr '\n' ' ')
for p in Running Scaling Succeeded; do
  grep -qw "$p" <<<"$history" && ok "status history shows $p" || fail "status history lacks $p: $history"
done
[ "$(tail -1 <<<"$(uniq "$work/phases.txt" | grep -v '^$')")" = Succeeded ] && ok "Succeeded is final" || fail "phase after Succeeded: $history"
describe=$(k describe hvdjob "$job" -n "$ns")
for reason in SuccessfulCreatePod SuccessfulDeletePod Running JobSucceeded; do
  grep -q "$reason" <<<"$describe" && ok "kubectl describe shows $reason" || fail "kubectl describe lacks $reason"
done
echo "status history: $history"
finish
