#include "launcher/multi_host_job.h"

#include <algorithm>
#include <chrono>

#include "khorovod/util/random_hex.h"
#include "launcher/host_discovery.h"
#include "launcher/spawn_placement.h"
#include "launcher/worker_env.h"

namespace khorovod::launcher {
namespace {

// The store outlives any static job; nothing ever registers with it, so its
// membership must never time out.
constexpr std::chrono::hours kStoreOnlyTimeout{24 * 365};

StatusOr<std::unique_ptr<rendezvous::RendezvousServer>> StartStore(const LaunchOptions& options,
                                                                   const std::string& address,
                                                                   const std::string& token) {
  rendezvous::ServerOptions server;
  server.host = address;
  server.port = 0;
  server.token = token;
  server.service.job = options.job_id;
  server.service.log = false;
  server.service.policy.min_workers = options.num_proc;
  server.service.policy.max_workers = options.num_proc;
  server.service.policy.elastic_timeout = kStoreOnlyTimeout;
  auto store = std::make_unique<rendezvous::RendezvousServer>(server);
  if (Status s = store->Start(); !s.ok()) {
    return Status::Unavailable("cannot start the job's store on " + address + ": " + s.message());
  }
  return store;
}

}  // namespace

StatusOr<MultiHostStaticJob> PrepareMultiHostStaticJob(const LaunchOptions& options,
                                                       const RemotePlan& plan,
                                                       const MetricsPorts& ports) {
  std::string lines = options.hosts;
  std::replace(lines.begin(), lines.end(), ',', '\n');
  DiscoveryResult parsed = ParseDiscoveryOutput(lines, 1);
  if (auto* error = std::get_if<std::string>(&parsed))
    return Status::InvalidArgument("-H: " + *error);
  const std::vector<DiscoveredHost>& hosts = std::get<std::vector<DiscoveredHost>>(parsed);

  StatusOr<std::string> token = RandomHex(32);
  if (!token.ok()) return token.status();
  MultiHostStaticJob job;
  StatusOr<std::unique_ptr<rendezvous::RendezvousServer>> store =
      StartStore(options, plan.LauncherAddress(), *token);
  if (!store.ok()) return store.status();
  job.store = std::move(*store);
  const std::string store_addr = plan.LauncherAddress() + ":" + std::to_string(job.store->port());

  const std::vector<std::string> base_env = CurrentEnvironment();
  const ResolvedExtraEnv extra = ResolveExtraEnv(options.extra_env, base_env);
  for (const DiscoveredHost& host : hosts) {
    for (int local = 0; static_cast<int>(job.workers.size()) < options.num_proc; ++local) {
      StatusOr<Placement> placement = SpawnPlacement(hosts, options.num_proc, host.name, local);
      if (!placement.ok()) break;  // this host's slots are used up
      ContractParams params;
      static_cast<Placement&>(params) = *placement;
      params.job_id = options.job_id;
      params.hostname = plan.AdvertisedAddress(host.name);
      std::vector<EnvVar> vars = extra.vars;
      for (EnvVar& v : ContractVariables(params)) vars.push_back(std::move(v));
      params.hostname = host.name;  // Horovod's HOROVOD_HOSTNAME: the name as listed
      for (EnvVar& v : HorovodVariables(params)) vars.push_back(std::move(v));
      for (EnvVar& v : plan.NetworkVariables()) vars.push_back(std::move(v));
      vars.push_back({"KHOROVOD_STORE_ADDR", store_addr});
      vars.push_back({"KHOROVOD_RENDEZVOUS_TOKEN", *token});
      if (ports.enabled())
        vars.push_back({"KHOROVOD_METRICS_PORT", std::to_string(ports.worker(placement->rank))});
      WorkerSpec spec{placement->rank, options.command, MergeEnvironment(base_env, vars), {}};
      job.workers.push_back(plan.IsRemote(host.name) ? plan.RemoteWorker(spec, host.name)
                                                     : std::move(spec));
    }
  }
  return job;
}

}  // namespace khorovod::launcher
