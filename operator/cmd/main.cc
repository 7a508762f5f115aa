// khorovod-operator: main owns every long-lived object (client, recorder,
// controller, elector, HTTP endpoint) and tears them down in order on
// SIGTERM/SIGINT or when leadership is lost.
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "cmd/health_server.h"
#include "cmd/options.h"
#include "controller/controller.h"
#include "controller/operator_metrics.h"
#include "controller/token.h"
#include "khorovod/util/mutex.h"
#include "khorovod/util/stop_signals.h"
#include "kube/cluster_config.h"
#include "kube/event_recorder.h"
#include "kube/leader_election.h"
#include "kube/rest_client.h"

extern char** environ;

namespace {

using namespace khorovod;

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

kube::ApiResult<kube::ClusterConfig> LoadConfig(const op::OperatorOptions& options) {
  if (!options.kubeconfig.empty()) return kube::LoadKubeconfig(options.kubeconfig, options.context);
  const char* dir = std::getenv("KHOROVOD_SERVICE_ACCOUNT_DIR");
  return kube::LoadInCluster(Environment(),
                             dir ? dir : "/var/run/secrets/kubernetes.io/serviceaccount");
}

// hostname + a random suffix, so two replicas on one host differ.
std::string DefaultIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::optional<std::string> token = op::NewToken();
  return std::string(host) + "-" + (token ? token->substr(0, 8) : std::to_string(getpid()));
}

// The first request to stop decides the exit status.
class StopLatch {
 public:
  void Request(int status) {
    MutexLock lock(mu_);
    if (!stopping_) status_ = status;
    stopping_ = true;
    cv_.notify_all();
  }
  int Wait() {
    MutexLock lock(mu_);
    lock.Wait(cv_, [&]() REQUIRES(mu_) { return stopping_; });
    return status_;
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  int status_ GUARDED_BY(mu_) = 0;
};

}  // namespace

int main(int argc, char** argv) {
  op::OperatorOptions options;
  int exit_code = 0;
  if (!op::ParseOperatorOptions(argc, argv, options, exit_code)) return exit_code;
  kube::ApiResult<kube::ClusterConfig> config = LoadConfig(options);
  if (!config.ok()) {
    std::cerr << "khorovod-operator: " << config.status().ToString() << "\n";
    return 2;
  }
  if (options.lease_namespace.empty()) options.lease_namespace = config->default_namespace;
  if (options.identity.empty()) options.identity = DefaultIdentity();

  khorovod::StopSignals signals;  // before any thread starts
  kube::RestClient client(config.value(), op::ToRestClientOptions(options));
  kube::RestClient lease_client(
      config.value());  // unthrottled: renewals never queue behind pod writes
  kube::EventRecorder events(client, "khorovod-operator");
  op::Controller controller(client, events, op::ToControllerOptions(options));
  kube::LeaderElector elector(lease_client, op::ToLeaderElectionOptions(options));
  op::OperatorMetrics metrics(op::OperatorState{
      [&] { return controller.PhaseCounts(); }, [&] { return controller.QueueDepth(); },
      [&] { return options.leader_elect ? elector.IsLeader() : controller.Ready(); },
      [&] { return controller.JobListCount(); }, [&] { return client.throttled_seconds(); },
      [&] { return controller.Gpus(); }});
  client.set_observer(
      [&metrics](const std::string& verb, const std::string& resource, int code, double seconds) {
        metrics.ObserveRequest(verb, resource, code, seconds);
      });
  controller.set_observer([&metrics](const op::ReconcileOutcome& o, double seconds) {
    metrics.ObserveReconcile(o, seconds);
  });

  // A standby replica is ready: it is healthy and waiting for the lease.
  op::HealthServer http(
      [&] {
        return options.leader_elect ? (!elector.IsLeader() || controller.Ready())
                                    : controller.Ready();
      },
      [&] { return metrics.Render(); });
  if (std::string error; !http.Start(options.metrics_bind, &error)) {
    std::cerr << "khorovod-operator: " << error << "\n";
    return 2;
  }
  StopLatch stop;
  std::thread([&] {
    int sig = signals.Wait();
    std::cerr << "khorovod-operator: signal " << sig << ", shutting down\n";
    stop.Request(0);
  }).detach();

  std::cerr << "khorovod-operator: " << options.identity << " talking to " << config->scheme
            << "://" << config->host << ":" << config->port
            << (options.leader_elect ? ", campaigning for the lease" : "") << "\n";
  auto start_controller = [&] {
    if (!controller.Start(std::chrono::seconds(60))) stop.Request(1);
  };
  std::thread campaign;
  if (options.leader_elect) {
    campaign = std::thread([&] {
      elector.Run(start_controller, [&] {
        std::cerr << "khorovod-operator: leadership lost; exiting so a restart campaigns afresh\n";
        stop.Request(1);
      });
    });
  } else {
    start_controller();
  }

  const int status = stop.Wait();
  elector.Stop();
  if (campaign.joinable()) campaign.join();
  client.StopWatches();
  lease_client.StopWatches();
  controller.Stop();
  elector.Release();
  http.Stop();
  std::cerr << "khorovod-operator: stopped\n";
  return status;
}
