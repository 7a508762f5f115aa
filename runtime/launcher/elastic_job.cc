#include "elastic_job.h"

#include <iostream>
#include <map>
#include <random>

#include "http_server.h"
#include "job_supervisor.h"
#include "metrics_ports.h"
#include "worker_env.h"

namespace khorovod::launcher {
namespace {

std::string RandomToken() {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 32; ++i) token.push_back(kHex[rd() % 16]);
  return token;
}

}  // namespace

int run_elastic_job(const LaunchOptions& opts, SignalPipe& signals) {
  rendezvous::ServerOptions server_options;
  server_options.host = opts.hostname;
  server_options.port = 0;
  server_options.token = RandomToken();
  auto& service = server_options.service;
  service.job = opts.job_id;
  service.log = false;
  service.policy.min_workers = opts.min_np;
  service.policy.max_workers = opts.max_np;
  // Workers started together register within milliseconds of each other.
  service.policy.settle = std::chrono::milliseconds(500);
  service.policy.heartbeat_timeout = std::chrono::milliseconds(5000);
  service.policy.elastic_timeout = opts.elastic_timeout;
  service.policy.reset_limit = opts.reset_limit;
  const auto launcher_env = current_environment();
  std::string ports_error;
  const std::optional<MetricsPorts> ports = metrics_ports_from_env(launcher_env, opts.num_proc, &ports_error);
  if (!ports) {
    std::cerr << "khorovodrun: " << ports_error << '\n';
    return 2;
  }
  if (ports->enabled()) server_options.metrics_port = ports->server();
  rendezvous::RendezvousServer server(server_options);
  if (Status s = server.Start(); !s.ok()) {
    std::cerr << "khorovodrun: cannot start the rendezvous server: " << s.message() << '\n';
    return 1;
  }

  const auto& base_env = launcher_env;
  const ResolvedExtraEnv extra = resolve_extra_env(opts.extra_env, base_env);
  for (const auto& name : extra.missing) {
    std::cerr << "khorovodrun: warning: -x " << name << " is not set here; not passing it\n";
  }
  const std::string address = opts.hostname + ":" + std::to_string(server.port());
  auto worker_name = [](int id) { return "worker-" + std::to_string(id); };
  std::map<int, int> slot_of;  // worker id -> metrics slot
  auto spec_for = [&](int id) {
    std::vector<EnvVar> vars = extra.vars;
    if (ports->enabled()) vars.push_back({"KHOROVOD_METRICS_PORT", std::to_string(ports->worker(slot_of[id]))});
    vars.push_back({"KHOROVOD_RENDEZVOUS_ADDR", address});
    vars.push_back({"KHOROVOD_RENDEZVOUS_TOKEN", server_options.token});
    vars.push_back({"KHOROVOD_WORKER_NAME", worker_name(id)});
    vars.push_back({"KHOROVOD_SLOTS", std::to_string(opts.max_np)});
    vars.push_back({"KHOROVOD_JOB_ID", opts.job_id});
    vars.push_back({"KHOROVOD_HOSTNAME", opts.hostname});
    vars.push_back({"KHOROVOD_ELASTIC_TIMEOUT_SECONDS", std::to_string(opts.elastic_timeout.count())});
    WorkerSpec spec;
    spec.rank = id;
    spec.argv = opts.command;
    spec.env = merge_environment(base_env, vars);
    return spec;
  };

  JobConfig config;
  for (int id = 0; id < opts.num_proc; ++id) {
    slot_of[id] = id;
    config.workers.push_back(spec_for(id));
  }
  config.grace_period = opts.grace_period;
  int next_id = opts.num_proc;
  int replacements = 0;
  config.replace_failed = [&](const WorkerExit& exit) -> std::optional<WorkerSpec> {
    // Survivors re-form now instead of after a heartbeat timeout.
    server.service().ReportFailure(worker_name(exit.rank), exit.status.describe());
    if (replacements >= opts.reset_limit) return std::nullopt;
    ++replacements;
    slot_of[next_id] = slot_of[exit.rank];
    return spec_for(next_id++);
  };
  std::cerr << "khorovodrun: elastic job " << opts.job_id << ": " << opts.num_proc
            << " workers (min " << opts.min_np << ", max " << opts.max_np
            << "), rendezvous on " << address << '\n';
  JobSupervisor supervisor(std::move(config), signals);
  const int result = supervisor.run();
  server.Stop();
  return result;
}

}  // namespace khorovod::launcher
