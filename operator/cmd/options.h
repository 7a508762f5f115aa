// OperatorOptions: the operator's whole configuration, parsed once from the
// command line (and the environment for in-cluster defaults) in one place.
//
// Thread-safety: a plain value.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "controller/controller.h"
#include "kube/leader_election.h"
#include "kube/rest_client.h"

namespace khorovod::op {

struct OperatorOptions {
  std::string kubeconfig;       // empty: in-cluster config
  std::string context;          // kubeconfig context; empty = current
  std::string watch_namespace;  // empty = all namespaces
  int workers = 4;
  int write_parallelism = 16;
  int resync_seconds = 300;
  int watch_timeout_seconds = 240;  // server-side timeout of each watch request
  bool leader_elect = true;
  std::string lease_namespace;  // default: the pod's namespace (or "default")
  std::string lease_name = "khorovod-operator";
  std::string identity;  // default: hostname + random suffix
  int lease_duration_seconds = 15;
  int renew_deadline_seconds = 10;
  int retry_period_seconds = 2;
  std::string metrics_bind = "0.0.0.0:8080";  // /metrics, /healthz, /readyz
  bool gang_scheduling = false;               // PodGroup CRD (scheduler-plugins) installed
  bool kueue = false;                         // Kueue's CRDs installed (Workloads for queued jobs)
  bool watch_nodes = true;         // replace workers of lost nodes (needs nodes get/list/watch)
  bool disruption_budgets = true;  // a PodDisruptionBudget per job at minReplicas
  // Client-side limit on API requests (token bucket); qps 0 = unlimited.
  // The leader lease has its own, unlimited client: a queue of pod writes
  // must not delay renewals past the renew deadline.
  double kube_api_qps = 200;
  int kube_api_burst = 400;
};

// Parses argv; on --help or an error, prints and sets `exit_code` (returns false).
bool ParseOperatorOptions(int argc, char** argv, OperatorOptions& options, int& exit_code);

// The components' options, from the parsed ones.
ControllerOptions ToControllerOptions(const OperatorOptions& options);
kube::LeaderElectionOptions ToLeaderElectionOptions(const OperatorOptions& options);
kube::RestClientOptions ToRestClientOptions(const OperatorOptions& options);

}  // namespace khorovod::op
