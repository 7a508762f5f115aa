// khorovod-operator: main owns every long-lived object (client, recorder,
// controller, elector, HTTP endpoint) and tears them down in order on
// SIGTERM/SIGINT.
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "cmd/options.h"
#include "controller/builders.h"
#include "controller/controller.h"
#include "controller/operator_metrics.h"
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

std::string DefaultIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + op::NewToken().substr(0, 8);
}

}  // namespace

int main(int argc, char** argv) {
  op::OperatorOptions options;
  int exit_code = 0;
  if (!op::ParseOperatorOptions(argc, argv, options, exit_code)) return exit_code;

  kube::ApiResult<kube::ClusterConfig> config =
      options.kubeconfig.empty()
          ? kube::LoadInCluster(Environment(), std::getenv("KHOROVOD_SERVICE_ACCOUNT_DIR")
                                                   ? std::getenv("KHOROVOD_SERVICE_ACCOUNT_DIR")
                                                   : "/var/run/secrets/kubernetes.io/serviceaccount")
          : kube::LoadKubeconfig(options.kubeconfig, options.context);
  if (!config.ok()) {
    std::cerr << "khorovod-operator: " << config.status().ToString() << "\n";
    return 2;
  }
  if (options.lease_namespace.empty()) options.lease_namespace = config->default_namespace;
  if (options.identity.empty()) options.identity = DefaultIdentity();

  // Block the stop signals before any thread starts, so only the waiter sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  kube::RestClient client(config.value());
  kube::EventRecorder events(client, "khorovod-operator");

  op::ControllerOptions copts;
  copts.watch_namespace = options.watch_namespace;
  copts.workers = options.workers;
  copts.resync = std::chrono::seconds(options.resync_seconds);
  copts.watch_timeout = std::chrono::seconds(options.watch_timeout_seconds);
  copts.reconciler.write_parallelism = options.write_parallelism;
  copts.reconciler.podgroups_available = options.gang_scheduling;
  op::Controller controller(client, events, copts);

  kube::LeaderElectionOptions lopts;
  lopts.lease_namespace = options.lease_namespace;
  lopts.lease_name = options.lease_name;
  lopts.identity = options.identity;
  lopts.lease_duration = std::chrono::seconds(options.lease_duration_seconds);
  lopts.renew_deadline = std::chrono::seconds(options.renew_deadline_seconds);
  lopts.retry_period = std::chrono::seconds(options.retry_period_seconds);
  kube::LeaderElector elector(client, lopts);

  op::OperatorMetrics metrics(op::OperatorState{
      [&] { return controller.PhaseCounts(); }, [&] { return controller.QueueDepth(); },
      [&] { return options.leader_elect ? elector.IsLeader() : controller.Ready(); },
      [&] { return controller.JobListCount(); }});
  client.set_observer([&metrics](const std::string& verb, const std::string& resource, int code, double seconds) {
    metrics.ObserveRequest(verb, resource, code, seconds);
  });
  controller.set_observer([&metrics](const op::ReconcileOutcome& o, double seconds) { metrics.ObserveReconcile(o, seconds); });

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  int status = 0;
  auto request_stop = [&](int code) {
    std::lock_guard<std::mutex> lock(mu);
    if (!stopping) status = code;
    stopping = true;
    cv.notify_all();
  };

  // HTTP endpoints.
  httplib::Server http;
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  http.Get("/readyz", [&](const httplib::Request&, httplib::Response& res) {
    // A standby replica is ready: it is healthy and waiting for the lease.
    bool ready = options.leader_elect ? (!elector.IsLeader() || controller.Ready()) : controller.Ready();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ok\n" : "caches not synced\n", "text/plain");
  });
  http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.Render(), op::OperatorMetrics::kContentType);
  });
  const auto colon = options.metrics_bind.rfind(':');
  const std::string bind_host = options.metrics_bind.substr(0, colon);
  const int bind_port = std::atoi(options.metrics_bind.substr(colon + 1).c_str());
  if (!http.bind_to_port(bind_host.c_str(), bind_port)) {
    std::cerr << "khorovod-operator: cannot listen on " << options.metrics_bind << "\n";
    return 2;
  }
  std::thread http_thread([&] { http.listen_after_bind(); });

  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::cerr << "khorovod-operator: signal " << sig << ", shutting down\n";
    request_stop(0);
  });
  signal_thread.detach();

  std::cerr << "khorovod-operator: " << options.identity << " talking to " << config->scheme << "://"
            << config->host << ":" << config->port << (options.leader_elect ? ", campaigning for the lease" : "")
            << "\n";
  auto start_controller = [&] {
    if (!controller.Start(std::chrono::seconds(60))) request_stop(1);
  };
  std::thread campaign;
  if (options.leader_elect) {
    campaign = std::thread([&] {
      elector.Run(start_controller, [&] {
        std::cerr << "khorovod-operator: leadership lost; exiting so a restart campaigns afresh\n";
        request_stop(1);
      });
    });
  } else {
    start_controller();
  }

  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stopping; });
  }
  elector.Stop();
  if (campaign.joinable()) campaign.join();
  client.StopWatches();
  controller.Stop();
  elector.Release();
  http.stop();
  http_thread.join();
  std::cerr << "khorovod-operator: stopped\n";
  return status;
}
