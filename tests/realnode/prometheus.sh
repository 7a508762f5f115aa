#!/usr/bin/env bash
# Prometheus for the real-node story (sourced by user_story.sh): Debian's
# prometheus, run inside the node's network namespace. Without
# prometheus-operator there is no PodMonitor/ServiceMonitor controller, so its
# configuration says the same thing with kubernetes_sd and relabelling:
#   khorovod-jobs      = the chart's PodMonitor: pods in any namespace having
#                        the label khorovod.dev/job-name, container port
#                        named "metrics", khorovod_job = that label;
#   khorovod-operator  = the chart's ServiceMonitor: endpoints of Services
#                        carrying the chart's selector labels, port "metrics".
# It reads the API as the user khorovod-node:prometheus (list/watch only).
PROM_PORT=9090
prom_pid=""

start_prometheus() {
  local pki="${KHOROVOD_NODE_DIR:-/var/lib/khorovod-node}/run/pki" api=https://10.250.0.1:6443
  local sd="{role: ROLE, api_server: $api, tls_config: {ca_file: $pki/ca.crt, cert_file: $pki/prometheus.crt, key_file: $pki/prometheus.key}}"
  mkdir -p "$work/prometheus"
  cat > "$work/prometheus/prometheus.yml" <<EOF
global: {scrape_interval: 2s, evaluation_interval: 2s}
scrape_configs:
- job_name: khorovod-jobs
  kubernetes_sd_configs: [${sd/ROLE/pod}]
  relabel_configs:
  - {source_labels: [__meta_kubernetes_pod_labelpresent_khorovod_dev_job_name], regex: "true", action: keep}
  - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics, action: keep}
  - {source_labels: [__meta_kubernetes_pod_label_khorovod_dev_job_name], target_label: khorovod_job}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
- job_name: khorovod-operator
  kubernetes_sd_configs: [${sd/ROLE/endpoints}]
  relabel_configs:
  - {source_labels: [__meta_kubernetes_service_label_app_kubernetes_io_name], regex: khorovod, action: keep}
  - {source_labels: [__meta_kubernetes_endpoint_port_name], regex: metrics, action: keep}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
EOF
  in_node prometheus --config.file "$work/prometheus/prometheus.yml" --storage.tsdb.path "$work/prometheus/data" \
    --web.listen-address "127.0.0.1:$PROM_PORT" --log.level warn > "$work/prometheus/prometheus.log" 2>&1 &
  prom_pid=$!
  if wait_for 60 prom_get /-/ready; then ok "Prometheus ready (kubernetes_sd for the chart's monitors)"
  else fail "Prometheus did not become ready"; tail -20 "$work/prometheus/prometheus.log"; return 1; fi
  operator_scraped() { prom_query 'up{job="khorovod-operator"} == 1' | grep -q '"value"'; }
  expect "Prometheus scrapes the operator's metrics Service (ServiceMonitor's selection)" 60 operator_scraped
}

stop_prometheus() {
  [ -n "$prom_pid" ] || return 0
  # in_node execs nsenter, which execs prometheus: the pid is prometheus's.
  kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; prom_pid=""
}

prom_get() { in_node curl -sf "http://127.0.0.1:$PROM_PORT$1"; }
prom_query() { in_node curl -sfG "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"; }
