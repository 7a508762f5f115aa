#include "cmd/options.h"

#include <CLI/CLI.hpp>

namespace khorovod::op {

bool ParseOperatorOptions(int argc, char** argv, OperatorOptions& o, int& exit_code) {
  CLI::App app{"khorovod-operator: reconciles HorovodJob resources"};
  app.add_option("--kubeconfig", o.kubeconfig,
                 "kubeconfig file (default: in-cluster service account)")
      ->envname("KUBECONFIG");
  app.add_option("--context", o.context, "kubeconfig context (default: current)");
  app.add_option("--namespace", o.watch_namespace, "Watch only this namespace (default: all)");
  app.add_option("--workers", o.workers, "Concurrent reconciles")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--write-parallelism", o.write_parallelism, "Concurrent pod writes within one job")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--resync-seconds", o.resync_seconds, "Informer resync period")
      ->check(CLI::Range(10, 86400))
      ->capture_default_str();
  app.add_option("--watch-timeout-seconds", o.watch_timeout_seconds,
                 "Server-side timeout of each watch")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--leader-elect", o.leader_elect, "Elect a leader through a Lease (true/false)")
      ->capture_default_str();
  app.add_option("--lease-namespace", o.lease_namespace, "Namespace of the leader Lease")
      ->envname("POD_NAMESPACE");
  app.add_option("--lease-name", o.lease_name, "Name of the leader Lease")->capture_default_str();
  app.add_option("--identity", o.identity,
                 "Leader-election identity (default: hostname + random suffix)")
      ->envname("POD_NAME");
  app.add_option("--lease-duration-seconds", o.lease_duration_seconds,
                 "How long a lease outlives its last renewal")
      ->check(CLI::Range(2, 600))
      ->capture_default_str();
  app.add_option("--renew-deadline-seconds", o.renew_deadline_seconds,
                 "Leader gives up after failing to renew this long")
      ->check(CLI::Range(1, 600))
      ->capture_default_str();
  app.add_option("--retry-period-seconds", o.retry_period_seconds,
                 "Interval between lease attempts")
      ->check(CLI::Range(1, 60))
      ->capture_default_str();
  app.add_option("--metrics-bind", o.metrics_bind, "host:port for /metrics, /healthz and /readyz")
      ->capture_default_str();
  app.add_option("--gang-scheduling", o.gang_scheduling,
                 "Create scheduler-plugins PodGroups for gang jobs")
      ->capture_default_str();
  app.add_option("--disruption-budgets", o.disruption_budgets,
                 "Keep a PodDisruptionBudget per job at minReplicas (policy/v1 "
                 "poddisruptionbudgets create, patch)");
  app.add_option("--watch-nodes", o.watch_nodes,
                 "Watch Nodes (cluster-wide get/list/watch) to replace the workers of a lost node "
                 "after the job's "
                 "runPolicy.nodeLossTimeoutSeconds instead of the 300 s taint eviction");
  app.add_option(
         "--kueue", o.kueue,
         "Kueue's CRDs are installed: jobs labelled kueue.x-k8s.io/queue-name wait for admission")
      ->capture_default_str();
  app.add_option("--kube-api-qps", o.kube_api_qps,
                 "Sustained API requests per second, all jobs together (0 = unlimited)")
      ->check(CLI::Range(0.0, 100000.0))
      ->capture_default_str();
  app.add_option("--kube-api-burst", o.kube_api_burst,
                 "API requests allowed at once above the sustained rate")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    return false;
  }
  if (!(o.retry_period_seconds < o.renew_deadline_seconds &&
        o.renew_deadline_seconds < o.lease_duration_seconds)) {
    std::fprintf(
        stderr,
        "need --retry-period-seconds < --renew-deadline-seconds < --lease-duration-seconds\n");
    exit_code = 2;
    return false;
  }
  if (o.metrics_bind.rfind(':') == std::string::npos) {
    std::fprintf(stderr, "--metrics-bind must be host:port, not '%s'\n", o.metrics_bind.c_str());
    exit_code = 2;
    return false;
  }
  return true;
}

ControllerOptions ToControllerOptions(const OperatorOptions& options) {
  ControllerOptions c;
  c.watch_namespace = options.watch_namespace;
  c.workers = options.workers;
  c.resync = std::chrono::seconds(options.resync_seconds);
  c.watch_timeout = std::chrono::seconds(options.watch_timeout_seconds);
  c.reconciler.write_parallelism = options.write_parallelism;
  c.reconciler.podgroups_available = options.gang_scheduling;
  c.reconciler.kueue_available = options.kueue;
  c.watch_nodes = options.watch_nodes;
  c.reconciler.disruption_budgets = options.disruption_budgets;
  return c;
}

kube::RestClientOptions ToRestClientOptions(const OperatorOptions& options) {
  kube::RestClientOptions r;
  r.rate_limit = {options.kube_api_qps, options.kube_api_burst};
  return r;
}

kube::LeaderElectionOptions ToLeaderElectionOptions(const OperatorOptions& options) {
  kube::LeaderElectionOptions l;
  l.lease_namespace = options.lease_namespace;
  l.lease_name = options.lease_name;
  l.identity = options.identity;
  l.lease_duration = std::chrono::seconds(options.lease_duration_seconds);
  l.renew_deadline = std::chrono::seconds(options.renew_deadline_seconds);
  l.retry_period = std::chrono::seconds(options.retry_period_seconds);
  return l;
}

}  // namespace khorovod::op
