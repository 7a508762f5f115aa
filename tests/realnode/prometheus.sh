#!/usr/bin/env bash
# shellcheck disable=SC2154  # root, work, here: set by the script that sources this one
# Prometheus for the real-node story (sourced by user_story.sh):
# `real-node.sh prometheus` runs Debian's prometheus inside the node with
# scripts/real-node/prometheus.yml: the chart's PodMonitor/ServiceMonitor
# selections, as file_sd targets that prom_discovery.py reads from the API
# (no prometheus-operator runs, and Debian's build lacks kubernetes_sd), and
# the dashboard's recording rules; `real-node.sh down` stops it.
start_prometheus() {
  if real_node prometheus > "$work/prometheus.log" 2>&1; then ok "Prometheus ready (targets: the chart's monitor selections, read from the API)"
  else fail "Prometheus did not start"; cat "$work/prometheus.log"; return 1; fi
  operator_scraped() { prom_query 'up{job="khorovod-operator"} == 1' | matches '"value"'; }
  expect "Prometheus scrapes the operator's metrics Service (the ServiceMonitor's selection)" 60 operator_scraped
}
prom_query() { in_node curl -sfG "http://127.0.0.1:9090/api/v1/query" --data-urlencode "query=$1"; }
