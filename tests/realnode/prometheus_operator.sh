#!/usr/bin/env bash
# The chart's monitoring through a real prometheus-operator, on the real node
# (stage "prometheus-operator" of scripts/test.sh). Everything runs as pods:
#   * prometheus-operator v0.85.0 (its Go module, built by scripts/k8s-tools.sh,
#     in a scratch image from scripts/images.sh monitoring) with the CRDs and
#     RBAC its module ships, in namespace "monitoring";
#   * a `Prometheus` CR whose selectors pick the monitors and rule by the
#     label the chart's metrics.*.labels values put on them; the operator makes
#     its StatefulSet: Prometheus 3.5.1 (Go module, kubernetes_sd only) and
#     the operator's config reloader, both built here. So the targets are
#     found by kubernetes_sd from the configuration the operator generated,
#     the rules come from the PrometheusRule through the operator's ConfigMap,
#     and every scrape is a real scrape of a running pod over the pod network;
#   * the chart (helm install) with serviceMonitor, podMonitor and
#     prometheusRule enabled, and a 2-worker HorovodJob
#     (prometheus-operator-job.yaml) whose worker-1 process is killed once
#     Prometheus has scraped the whole job, so the elastic panels (resets,
#     recovery, re-formation) have something to show.
# Asserted: the operator's StatefulSet runs Prometheus; the ServiceMonitor's
# target (the khorovod operator) and the PodMonitor's (rendezvous and both
# workers) are up; every rule of the chart's PrometheusRule is loaded and
# evaluates without error (/api/v1/rules); every query of
# deploy/monitoring/khorovod-dashboard.json, the operator's included, returns
# a number ($khorovod_job = the job, $__rate_interval = 30s), and the
# dashboard's job variable (label_values) offers the job.
# Every wait is bounded. The node is brought up fresh and always taken down
# (which removes every pod, CRD and namespace made here).
# Prints timings and ends with "prometheus-operator: N passed, M failed".
# Usage: tests/realnode/prometheus_operator.sh BUILD_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tests/realnode"
build_dir=${1:?usage: prometheus_operator.sh BUILD_DIR}
work="$root/build/test-logs/prometheus-operator"
rm -rf "$work"; mkdir -p "$work"
source "$here/lib.sh"
source "$here/scenarios.sh"
JOB=monitored JOB_NS=monitored MON_NS=monitoring
# The label a kube-prometheus-style Prometheus selects its monitors by.
LABEL_KEY=release LABEL_VALUE=khorovod-prometheus-operator-test
summary() { echo "prometheus-operator: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; }
broken() { fail "$*"; summary; exit 1; }

t0=$SECONDS
tools=$(bash "$root/scripts/k8s-tools.sh" prometheus-operator prometheus-config-reloader prometheus helm | tail -1) \
  || broken "building prometheus-operator, its config reloader or prometheus failed"
t_tools=$((SECONDS - t0))
bash "$root/scripts/images.sh" prebuilt-core "$build_dir" || broken "building the khorovod images failed"
read -r op_image reloader_image prom_image < <(bash "$root/scripts/images.sh" monitoring | tail -1)
[ -n "${prom_image:-}" ] || broken "building the monitoring images failed"
prom_version=${prom_image##*:}
t_images=$((SECONDS - t0 - t_tools))
trap 'bash "$root/scripts/real-node.sh" down' EXIT
trap 'exit 143' TERM INT   # a timeout still takes the node down
bash "$root/scripts/real-node.sh" down
bash "$root/scripts/real-node.sh" up || broken "the real node did not come up (see the messages above)"
bash "$root/scripts/images.sh" load ghcr.io/khorovod/khorovod-operator:0.1.0 ghcr.io/khorovod/khorovod-runtime:0.1.0 \
  "$op_image" "$reloader_image" "$prom_image" || broken "loading the images into containerd failed"
t_node=$((SECONDS - t0 - t_tools - t_images))
manifests="$tools/manifests/prometheus-operator"

echo "== prometheus-operator ($op_image) with its CRDs"
# Server-side apply: the Prometheus CRD is larger than client-side apply's
# last-applied annotation allows.
if k apply --server-side -f "$manifests/prometheus-operator-crd/" > "$work/crds.log" 2>&1 &&
   k wait --for condition=Established --timeout 60s -f "$manifests/prometheus-operator-crd/" >> "$work/crds.log" 2>&1; then
  ok "prometheus-operator's CRDs (from its module) established"
else fail "the CRDs"; cat "$work/crds.log"; summary; exit 1; fi
k create namespace "$MON_NS" >/dev/null
# The module's RBAC examples, in our namespace; our own Deployment, since the
# example's names images from a registry.
for f in prometheus-operator/prometheus-operator-service-account.yaml prometheus-operator/prometheus-operator-cluster-role.yaml \
         prometheus-operator/prometheus-operator-cluster-role-binding.yaml \
         prometheus/prometheus-service-account.yaml prometheus/prometheus-cluster-role.yaml \
         prometheus/prometheus-cluster-role-binding.yaml; do
  sed "s/namespace: default/namespace: $MON_NS/" "$manifests/$f"
  echo "---"
done > "$work/rbac.yaml"
k apply -n "$MON_NS" -f "$work/rbac.yaml" > "$work/rbac.log" 2>&1 || { fail "the RBAC examples"; cat "$work/rbac.log"; }
k apply -n "$MON_NS" -f - > "$work/operator.log" 2>&1 <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: prometheus-operator}
spec:
  replicas: 1
  selector: {matchLabels: {app.kubernetes.io/name: prometheus-operator}}
  template:
    metadata: {labels: {app.kubernetes.io/name: prometheus-operator}}
    spec:
      serviceAccountName: prometheus-operator
      automountServiceAccountToken: true
      securityContext: {runAsNonRoot: true, runAsUser: 65534}
      containers:
      - name: prometheus-operator
        image: $op_image
        args: [--prometheus-config-reloader=$reloader_image, --log-level=info]
        ports: [{containerPort: 8080, name: http}]
        resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 256Mi}}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
EOF
if k -n "$MON_NS" rollout status deployment/prometheus-operator --timeout 180s >> "$work/operator.log" 2>&1; then
  ok "prometheus-operator runs (a pod, in-cluster config)"
else
  fail "prometheus-operator did not become ready"; cat "$work/operator.log"
  k -n "$MON_NS" logs deploy/prometheus-operator --tail 40; summary; exit 1
fi

echo "== a Prometheus CR selecting the chart's monitors and rule"
k apply -n "$MON_NS" -f - > "$work/prometheus-cr.log" 2>&1 <<EOF
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {name: khorovod}
spec:
  image: $prom_image
  version: $prom_version
  replicas: 1
  serviceAccountName: prometheus
  scrapeInterval: 2s
  evaluationInterval: 2s
  serviceMonitorSelector: {matchLabels: {$LABEL_KEY: $LABEL_VALUE}}
  serviceMonitorNamespaceSelector: {}
  podMonitorSelector: {matchLabels: {$LABEL_KEY: $LABEL_VALUE}}
  podMonitorNamespaceSelector: {}
  ruleSelector: {matchLabels: {$LABEL_KEY: $LABEL_VALUE}}
  ruleNamespaceSelector: {}
  resources: {requests: {cpu: 100m, memory: 200Mi}, limits: {memory: 1Gi}}
EOF
[ $? -eq 0 ] && ok "Prometheus CR created" || { fail "Prometheus CR"; cat "$work/prometheus-cr.log"; }
prom_pod=prometheus-khorovod-0
prom_ready() { [ "$(jp pod "$prom_pod" -n "$MON_NS" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
if expect "the operator's StatefulSet runs Prometheus ($prom_image) with its config reloader, Ready" 240 prom_ready; then :
else
  k get pods -A -o wide; k -n "$MON_NS" describe pod "$prom_pod" | tail -30
  k -n "$MON_NS" logs deploy/prometheus-operator --tail 40; summary; exit 1
fi
prom_url="http://$(jp pod "$prom_pod" -n "$MON_NS" -o jsonpath='{.status.podIP}'):9090"
check() { in_node python3 "$here/prom_check.py" "$@"; }

echo "== helm install with serviceMonitor, podMonitor and prometheusRule"
sel="$LABEL_KEY=$LABEL_VALUE"
if in_node helm install khorovod "$root/charts/khorovod" -n khorovod-system --create-namespace \
     --set metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.interval=2s \
     --set metrics.podMonitor.enabled=true,metrics.podMonitor.interval=2s,metrics.prometheusRule.enabled=true \
     --set-string "metrics.serviceMonitor.labels.$LABEL_KEY=$LABEL_VALUE" \
     --set-string "metrics.podMonitor.labels.$LABEL_KEY=$LABEL_VALUE" \
     --set-string "metrics.prometheusRule.labels.$LABEL_KEY=$LABEL_VALUE" \
     --wait --timeout 180s > "$work/helm.log" 2>&1; then
  ok "helm install of the chart with its ServiceMonitor, PodMonitor and PrometheusRule"
else fail "helm install"; cat "$work/helm.log"; summary; exit 1; fi
n=$(k get servicemonitors,podmonitors,prometheusrules -A -l "$sel" --no-headers 2>/dev/null | wc -l)
[ "$n" -eq 3 ] && ok "the chart's ServiceMonitor, PodMonitor and PrometheusRule carry the selected label" \
  || fail "$n of the chart's 3 monitoring objects carry $sel"

sm_pool="serviceMonitor/khorovod-system/khorovod/0"
pm_pool="podMonitor/khorovod-system/khorovod-jobs/0"
# targets_up WHAT POOL MIN: a step; the pool's targets go to the log either way.
targets_up() {
  expect "$1" 120 check targets "$prom_url" "$2" "$3"; local rc=$?
  check targets "$prom_url" "$2" "$3" | sed 's/^/  | /'
  return $rc
}
targets_up "the ServiceMonitor's target (the khorovod operator's metrics Service) is up" "$sm_pool" 1
expect "the PrometheusRule's rules are loaded and evaluate without error (/api/v1/rules)" 120 \
  check rules "$prom_url" "$root/charts/khorovod/files/khorovod-rules.yaml" || check rules "$prom_url" "$root/charts/khorovod/files/khorovod-rules.yaml"

echo "== a HorovodJob, scraped through the PodMonitor"
k create namespace "$JOB_NS" >/dev/null
wait_for 30 k get serviceaccount default -n "$JOB_NS"
k apply -n "$JOB_NS" -f "$here/prometheus-operator-job.yaml" >/dev/null && ok "HorovodJob $JOB created" || fail "HorovodJob $JOB"
expect "$JOB: 2 workers and the rendezvous pod Running" 180 at_least_running "$JOB" "$JOB_NS" 3 || { dump_job "$JOB" "$JOB_NS"; summary; exit 1; }
targets_up "the PodMonitor's targets (rendezvous and 2 workers) are up" "$pm_pool" 3 || dump_job "$JOB" "$JOB_NS"
prom_value() {  # expr: the first sample's value, empty when none
  in_node curl -sfG "$prom_url/api/v1/query" --data-urlencode "query=$1" \
    | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
# The whole job scraped at world size 2 (the recovery histograms still
# empty) before a worker is killed, so the elastic series move after a scrape.
whole_job() {
  [ "$(prom_value "count(khorovod_worker_world_size{khorovod_job=\"$JOB\"} == 2)")" = 2 ] &&
  [ "$(prom_value "count(khorovod_worker_recovery_duration_seconds_count{khorovod_job=\"$JOB\"})")" = 2 ] &&
  [ -n "$(prom_value "khorovod_rendezvous_generation{khorovod_job=\"$JOB\"}")" ]
}
expect "Prometheus holds both workers at world size 2 and the rendezvous generation" 120 whole_job || dump_job "$JOB" "$JOB_NS"
pid=$(container_pid "$JOB-worker-1" "$JOB_NS")
if [ -n "$pid" ] && kill -9 "$pid"; then ok "killed worker-1's trainer process (host pid $pid)"
else fail "could not find worker-1's container process"; fi
recovered() {
  local r w
  r=$(prom_value "sum(khorovod_worker_resets_total{khorovod_job=\"$JOB\"})"); w=$(prom_value "khorovod_job:world_size:max{khorovod_job=\"$JOB\"}")
  [ "${r:-0}" != 0 ] && [ "$w" = 2 ]
}
expect "Prometheus sees a reset and the job back at world size 2 (the replacement worker)" 240 recovered || dump_job "$JOB" "$JOB_NS"

echo "== every dashboard query returns data"
t_dash=$SECONDS
if check dashboard "$prom_url" "$root/deploy/monitoring/khorovod-dashboard.json" "$JOB" 30s 240 | tee "$work/dashboard.log"; then
  ok "$(tail -1 "$work/dashboard.log") in $((SECONDS - t_dash))s"
else fail "dashboard queries without data (see above)"; dump_job "$JOB" "$JOB_NS"; fi
# The rules again, now that the job's series exist: still healthy.
check rules "$prom_url" "$root/charts/khorovod/files/khorovod-rules.yaml" > "$work/rules.log" && ok "$(cat "$work/rules.log") (with the job running)" \
  || { fail "rules after the job ran"; cat "$work/rules.log"; }
k get pods -A -o wide > "$work/pods.txt" 2>&1
k delete namespace "$JOB_NS" --wait=false >/dev/null

echo "prometheus-operator: timings: tools ${t_tools}s, images ${t_images}s, node up and image load ${t_node}s," \
     "test $((SECONDS - t0 - t_tools - t_images - t_node))s, total $((SECONDS - t0))s"
summary
