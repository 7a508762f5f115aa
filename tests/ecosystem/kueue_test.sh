#!/usr/bin/env bash
# Kueue admission end to end: the operator (--kueue) against Kueue's own
# controller manager (built from its Go module by scripts/k8s-tools.sh) on the
# test control plane (tests/operator/cluster/cluster.sh) with kwok nodes.
# One ClusterQueue holds 3.5 CPUs of ResourceFlavor "tainted", whose nodes
# carry pool=kueue-pool and a dedicated=kueue:NoSchedule taint; the jobs'
# templates say neither, so a pod runs there only with the flavor applied.
# Each worker asks for 1 CPU, the rendezvous pod for 0.1.
#   1. job "alpha" (replicas 3 in [1, 3]) gets a Workload (worker pod set
#      count 3, minCount 1; rendezvous 1), is admitted, and its pods run with
#      the flavor's node selector and toleration;
#   2. job "beta" (2 workers, not elastic) waits: Suspended, no pods;
#   3. alpha's Workload is deactivated (Kueue evicts it): alpha's pods go,
#      the operator gives the quota back, beta is admitted and runs;
#   4. alpha is reactivated: Kueue admits it partially (1 worker in the
#      1.4 CPUs left) and the operator runs exactly 1 worker;
#   5. beta finishes: its Workload is Finished (its quota returns);
#   6. a job with spec.managedBy naming another controller is left alone;
#   7. GPUs: a ClusterQueue with an nvidia.com/gpu quota of 6 over two kwok
#      nodes of 4 GPUs each, tainted nvidia.com/gpu:NoSchedule; jobs of 2-GPU
#      workers (no slotsPerWorker, no toleration in their templates): the
#      first is admitted whole (4 GPUs), the second partially (1 worker in
#      the 2 left), the third queues; the admitted workers run on the GPU
#      nodes with one slot per GPU.
# Ends with "kueue: N passed, M failed".
# Usage: tests/ecosystem/kueue_test.sh OPERATOR_BINARY
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
op_bin=${1:?usage: kueue_test.sh OPERATOR_BINARY}
source "$root/tests/ecosystem/lib.sh"
eco_start_cluster kueue
eco_tools kueue
manifests="$K8S_BIN/manifests/kueue/bases"

k apply --server-side -f "$manifests" >/dev/null
wait_until 120 crds_established workloads.kueue.x-k8s.io clusterqueues.kueue.x-k8s.io localqueues.kueue.x-k8s.io \
  resourceflavors.kueue.x-k8s.io || { echo "FAIL: Kueue's CRDs are not established"; exit 1; }
k create namespace kueue-system >/dev/null
# Kueue's own cert management fills this Secret and the certificate directory.
k create secret generic kueue-webhook-server-cert -n kueue-system >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cat > "$dir/kueue-config.yaml" <<YAML
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "127.0.0.1:$(free_port)"}
metrics: {bindAddress: "127.0.0.1:$(free_port)"}
webhook: {port: $(free_port), host: 127.0.0.1, certDir: "$dir/kueue-certs"}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: true}
manageJobsWithoutQueueName: false
integrations:
  frameworks: ["batch/job"]
  externalFrameworks: ["HorovodJob.v1alpha1.khorovod.dev"]
YAML
# Kueue runs with the admin identity of the test cluster (its release RBAC is
# a kustomize overlay); it reads KUBECONFIG like any controller-runtime manager.
# Its on-demand visibility API is an aggregated API server that needs
# in-cluster configuration: off here (nothing in the test reads it).
KUBECONFIG="$dir/cluster/admin.kubeconfig" "$K8S_BIN/kueue" --config "$dir/kueue-config.yaml" \
  --feature-gates=VisibilityOnDemand=false --zap-log-level=2 > "$dir/kueue.log" 2>&1 &
kueue_pid=$!
eco_track $kueue_pid kueue
# Kueue's cert rotator fills the Secret and waits for its files in certDir,
# where a kubelet would mount the Secret: write them as the kubelet would,
# all three from one read, and only a certificate that matches its key (the
# rotator may rewrite the Secret while it starts).
mkdir -p "$dir/kueue-certs"
copy_certs() {
  k get secret kueue-webhook-server-cert -n kueue-system -o json | python3 -c '
import base64, json, os, sys
data = json.load(sys.stdin).get("data") or {}
names = ["ca.crt", "tls.crt", "tls.key"]
if not all(data.get(n) for n in names): sys.exit(1)
for n in names:
    with open(os.path.join(sys.argv[1], n), "wb") as f: f.write(base64.b64decode(data[n]))' "$dir/kueue-certs" &&
  [ "$(openssl x509 -noout -pubkey -in "$dir/kueue-certs/tls.crt" | sha256sum)" = \
    "$(openssl pkey -pubout -in "$dir/kueue-certs/tls.key" | sha256sum)" ]
}
check "Kueue's cert rotator fills its Secret (copied where a kubelet would mount it)" wait_until 60 copy_certs

eco_start_kwok
eco_add_nodes kueue 1 4 "1500m" "dedicated: kueue"
for i in 1 2 3 4; do k taint node "kueue-$i" dedicated=kueue:NoSchedule --overwrite >/dev/null; done
k label nodes -l pool=kueue pool=kueue-pool --overwrite >/dev/null
eco_start_operator "$op_bin" --kueue=true
k create namespace team >/dev/null
wait_until 30 k get serviceaccount default -n team

k apply -f - >/dev/null <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tainted}
spec:
  nodeLabels: {pool: kueue-pool}
  tolerations: [{key: dedicated, operator: Equal, value: kueue, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: tainted
      resources:
      - {name: cpu, nominalQuota: 3500m}
      - {name: memory, nominalQuota: 64Gi}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team}
spec: {clusterQueue: cq}
YAML
check "Kueue's ClusterQueue becomes active" \
  wait_until 120 eval '[ "$(k get clusterqueue cq -o jsonpath="{.status.conditions[?(@.type==\"Active\")].status}")" = True ]'
# Nothing below can pass without Kueue: stop here, with its log, if it died.
if ! kill -0 "$kueue_pid" 2>/dev/null; then
  echo "FAIL: Kueue's controller manager exited"; eco_failed=$((eco_failed + 1)); eco_finish kueue; exit 1
fi

job() {  # name replicas min max [extra spec lines]
  cat <<YAML
apiVersion: khorovod.dev/v1alpha1
kind: HorovodJob
metadata: {name: $1, namespace: team, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  replicas: $2
  minReplicas: $3
  maxReplicas: $4
${5:-}
  worker:
    template:
      spec:
        containers:
        - name: trainer
          image: khorovod/runtime:sim
          command: [khorovod-example-trainer]
          resources: {requests: {cpu: "1", memory: 1Gi}}
YAML
}
wl() { k get workload "horovodjob-$1" -n team -o jsonpath="$2" 2>/dev/null; }
wl_cond() { wl "$1" "{.status.conditions[?(@.type==\"$2\")].status}"; }
pods_of() { k get pods -n team -l "khorovod.dev/job-name=$1${2:+,khorovod.dev/role=$2}" --no-headers 2>/dev/null | wc -l; }
running_workers() {
  k get pods -n team -l "khorovod.dev/job-name=$1,khorovod.dev/role=worker" --field-selector status.phase=Running \
    --no-headers 2>/dev/null | wc -l
}
phase() { k get hvdjob "$1" -n team -o jsonpath='{.status.phase}'; }

# 1. alpha is admitted and runs on the flavor's nodes.
job alpha 3 1 3 | k apply -f - >/dev/null
check "alpha: a Workload owned by the job, worker pod set count 3 minCount 1, rendezvous 1" wait_until 30 eval \
  '[ "$(wl alpha "{.metadata.ownerReferences[0].name}/{.spec.podSets[0].count}/{.spec.podSets[0].minCount}/{.spec.podSets[1].count}/{.spec.queueName}")" = alpha/3/1/1/lq ]'
check "alpha: Kueue admits it" wait_until 60 eval '[ "$(wl_cond alpha Admitted)" = True ]'
check "alpha: three workers run" wait_until 60 eval '[ "$(running_workers alpha)" -eq 3 ]'
check "alpha: workers carry the flavor's node selector and toleration" eval \
  '[ "$(k get pod alpha-worker-0 -n team -o jsonpath="{.spec.nodeSelector.pool}/{.spec.tolerations[?(@.key==\"dedicated\")].value}")" = kueue-pool/kueue ]'
check "alpha: the rendezvous pod too" eval \
  '[ "$(k get pod alpha-rendezvous -n team -o jsonpath="{.spec.nodeSelector.pool}")" = kueue-pool ]'

# 2. beta waits for quota.
job beta 2 2 2 | k apply -f - >/dev/null
check "beta: Workload pending, job Suspended (WaitingForAdmission), no pods" wait_until 30 eval \
  '[ "$(wl_cond beta QuotaReserved)" = False ] && [ "$(phase beta)" = Suspended ] &&
   [ "$(k get hvdjob beta -n team -o jsonpath="{.status.conditions[?(@.type==\"Suspended\")].reason}")" = WaitingForAdmission ] &&
   [ "$(pods_of beta)" -eq 0 ]'
sleep 3
check "beta: still no pods 3 s later" eval '[ "$(pods_of beta)" -eq 0 ]'

# 3. Evict alpha (deactivate its Workload): its quota goes to beta.
k patch workload horovodjob-alpha -n team --type merge -p '{"spec":{"active":false}}' >/dev/null
check "alpha: evicted, pods deleted, job Suspended" wait_until 60 eval \
  '[ "$(pods_of alpha)" -eq 0 ] && [ "$(phase alpha)" = Suspended ]'
check "alpha: the operator gave the quota back (QuotaReserved False, no admission)" wait_until 60 eval \
  '[ "$(wl_cond alpha QuotaReserved)" = False ] && [ -z "$(wl alpha "{.status.admission}")" ]'
check "beta: admitted and two workers run" wait_until 60 eval \
  '[ "$(wl_cond beta Admitted)" = True ] && [ "$(running_workers beta)" -eq 2 ]'

# 4. Reactivate alpha: partial admission, 1 worker in the 1.4 CPUs left.
k patch workload horovodjob-alpha -n team --type merge -p '{"spec":{"active":true}}' >/dev/null
check "alpha: re-admitted with 1 worker (partial admission)" wait_until 60 eval \
  '[ "$(wl_cond alpha Admitted)" = True ] && [ "$(wl alpha "{.status.admission.podSetAssignments[0].count}")" = 1 ]'
check "alpha: runs exactly 1 worker" wait_until 60 eval '[ "$(running_workers alpha)" -eq 1 ]'
sleep 3
check "alpha: still 1 worker 3 s later (replicas 3 capped by the admission)" eval '[ "$(pods_of alpha worker)" -eq 1 ]'

# 5. beta finishes: its Workload is Finished.
for p in beta-worker-0 beta-worker-1; do
  k patch pod "$p" -n team --subresource status --type merge -p '{"status":{"phase":"Succeeded","conditions":[{"type":"Ready","status":"False"}],"containerStatuses":[{"name":"trainer","image":"i","imageID":"","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":0}}}]}}' >/dev/null || true
done
check "beta: Succeeded and its Workload Finished" wait_until 60 eval \
  '[ "$(phase beta)" = Succeeded ] && [ "$(wl_cond beta Finished)" = True ]'
check "Kueue's ClusterQueue no longer counts beta (1 admitted workload)" wait_until 60 eval \
  '[ "$(k get clusterqueue cq -o jsonpath="{.status.admittedWorkloads}")" = 1 ]'

# 6. managedBy another controller: no Workload, no pods, no status.
job gamma 1 1 1 "  managedBy: example.com/other-controller" | k apply -f - >/dev/null
sleep 3
check "gamma (managedBy another controller): no Workload, no pods, no status" eval \
  '[ -z "$(wl gamma "{.metadata.name}")" ] && [ "$(pods_of gamma)" -eq 0 ] && [ -z "$(phase gamma)" ]'
check "managedBy is immutable" eval \
  '! k patch hvdjob gamma -n team --type merge -p "{\"spec\":{\"managedBy\":\"khorovod.dev/operator\"}}"'

# 7. GPUs: a quota of nvidia.com/gpu admits, partially admits and queues.
eco_add_nodes gpu 1 2 "32" "" "nvidia.com/gpu: \"4\""
for i in 1 2; do k taint node "gpu-$i" nvidia.com/gpu=present:NoSchedule --overwrite >/dev/null; done
k apply -f - >/dev/null <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeLabels: {pool: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-gpu}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: gpu
      resources:
      - {name: cpu, nominalQuota: "32"}
      - {name: memory, nominalQuota: 64Gi}
      - {name: nvidia.com/gpu, nominalQuota: "6"}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq-gpu, namespace: team}
spec: {clusterQueue: cq-gpu}
YAML
check "Kueue's GPU ClusterQueue becomes active" \
  wait_until 120 eval '[ "$(k get clusterqueue cq-gpu -o jsonpath="{.status.conditions[?(@.type==\"Active\")].status}")" = True ]'
gpu_job() {  # name replicas min max
  cat <<YAML
apiVersion: khorovod.dev/v1alpha1
kind: HorovodJob
metadata: {name: $1, namespace: team, labels: {kueue.x-k8s.io/queue-name: lq-gpu}}
spec:
  replicas: $2
  minReplicas: $3
  maxReplicas: $4
  worker:
    template:
      spec:
        containers:
        - name: trainer
          image: khorovod/runtime:sim
          command: [khorovod-slots, khorovod-example-trainer]
          resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {nvidia.com/gpu: 2}}
YAML
}
gpu_job g1 2 1 2 | k apply -f - >/dev/null
check "g1: admitted whole, 2 workers of 2 GPUs run" wait_until 60 eval \
  '[ "$(wl_cond g1 Admitted)" = True ] && [ "$(running_workers g1)" -eq 2 ]'
check "g1: its workers are on the GPU nodes (the GPU taint tolerated by default), 2 slots each" eval \
  '[ "$(k get pods -n team -l khorovod.dev/job-name=g1,khorovod.dev/role=worker -o jsonpath="{.items[*].spec.nodeName}" | tr " " "\n" | grep -c "^gpu-")" -eq 2 ] &&
   [ "$(k get pod g1-worker-0 -n team -o jsonpath="{.spec.containers[0].env[?(@.name==\"KHOROVOD_SLOTS\")].value}")" = 2 ]'
check "g1: status.gpus 4 of gpusWanted 4" wait_until 30 eval \
  '[ "$(k get hvdjob g1 -n team -o jsonpath="{.status.gpus}/{.status.gpusWanted}")" = 4/4 ]'
gpu_job g2 2 1 2 | k apply -f - >/dev/null
check "g2: admitted partially: 1 worker in the 2 GPUs left" wait_until 60 eval \
  '[ "$(wl_cond g2 Admitted)" = True ] && [ "$(wl g2 "{.status.admission.podSetAssignments[0].count}")" = 1 ] &&
   [ "$(running_workers g2)" -eq 1 ]'
check "g2: status.gpusWanted 2 (the admitted size)" wait_until 30 eval \
  '[ "$(k get hvdjob g2 -n team -o jsonpath="{.status.gpusWanted}")" = 2 ]'
gpu_job g3 1 1 1 | k apply -f - >/dev/null
check "g3: queued (no GPU quota left): Suspended, no pods" wait_until 30 eval \
  '[ "$(wl_cond g3 QuotaReserved)" = False ] && [ "$(phase g3)" = Suspended ] && [ "$(pods_of g3)" -eq 0 ]'
k delete hvdjob g1 -n team >/dev/null
check "g3: admitted once g1's GPUs are released, its worker runs" wait_until 90 eval \
  '[ "$(wl_cond g3 Admitted)" = True ] && [ "$(running_workers g3)" -eq 1 ]'

eco_finish kueue
