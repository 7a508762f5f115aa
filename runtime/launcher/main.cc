// khorovodrun - start N workers of a khorovod program (like `horovodrun
// -np N`), here or on remote hosts over ssh (remote_hosts.h). See
// launch_options.h for the command line, worker_env.h for the environment
// contract and job_supervisor.h for how failures and signals are handled.
//
// main() owns every resource, in this order: the signal pipe (so no signal
// is missed once workers exist), the rendezvous directory (with remote
// hosts: the store server, multi_host_job.h), then the supervisor and its
// workers. Destruction runs in reverse: workers are gone
// before the directory is removed.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "launcher/elastic_job.h"
#include "launcher/job_supervisor.h"
#include "launcher/launch_options.h"
#include "launcher/metrics_ports.h"
#include "launcher/multi_host_job.h"
#include "launcher/remote_hosts.h"
#include "launcher/scoped_temp_dir.h"
#include "launcher/signal_pipe.h"
#include "launcher/worker_env.h"

namespace {

using namespace khorovod::launcher;

// A launcher started with fd 0/1/2 closed would hand those numbers to its
// own pipes, and workers would then write into the wrong places.
void EnsureStandardFdsOpen() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) {
      // open returns the lowest free number, i.e. exactly `fd`.
      ::open("/dev/null", O_RDWR);
    }
  }
}

std::vector<WorkerSpec> MakeWorkerSpecs(const LaunchOptions& opts, const std::string& store_path,
                                        const MetricsPorts& ports,
                                        const std::vector<EnvVar>& network) {
  const std::vector<std::string> base_env = CurrentEnvironment();
  const ResolvedExtraEnv extra = ResolveExtraEnv(opts.extra_env, base_env);
  for (const auto& name : extra.missing) {
    std::cerr << "khorovodrun: warning: -x " << name
              << ": not set in the launcher's environment; not passed to workers\n";
  }
  std::vector<WorkerSpec> specs;
  specs.reserve(static_cast<std::size_t>(opts.num_proc));
  for (int rank = 0; rank < opts.num_proc; ++rank) {
    std::vector<EnvVar> overrides = extra.vars;
    const ContractParams params =
        SingleHostParams(rank, opts.num_proc, store_path, opts.job_id, opts.hostname);
    const auto contract = ContractVariables(params);
    const auto horovod = HorovodVariables(params);
    overrides.insert(overrides.end(), contract.begin(), contract.end());
    overrides.insert(overrides.end(), horovod.begin(), horovod.end());
    overrides.insert(overrides.end(), network.begin(), network.end());
    if (ports.enabled())
      overrides.push_back({"KHOROVOD_METRICS_PORT", std::to_string(ports.worker(rank))});
    specs.push_back(WorkerSpec{rank, opts.command, MergeEnvironment(base_env, overrides), {}});
  }
  return specs;
}

// --verbose: what each worker runs, with the settings khorovodrun gives it.
void PrintWorkerSpecs(const std::vector<WorkerSpec>& specs) {
  for (const WorkerSpec& spec : specs) {
    std::cerr << "khorovodrun: worker " << spec.rank << ":";
    for (const std::string& var : spec.env) {
      const bool secret = var.rfind("KHOROVOD_RENDEZVOUS_TOKEN=", 0) == 0;
      if (!secret && (var.rfind("KHOROVOD_", 0) == 0 || var.rfind("HOROVOD_", 0) == 0))
        std::cerr << ' ' << var;
    }
    for (const std::string& arg : spec.argv) std::cerr << ' ' << arg;
    if (!spec.stdin_data.empty()) std::cerr << " (environment on ssh's stdin)";
    std::cerr << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  EnsureStandardFdsOpen();
  const std::vector<std::string> args(argv + 1, argv + argc);
  ParseOutcome parsed = ParseLaunchOptions(args, std::cout, std::cerr);
  if (!parsed.options) return parsed.exit_code;
  LaunchOptions opts = std::move(*parsed.options);
  if (opts.job_id.empty()) {
    khorovod::StatusOr<std::string> id = GenerateJobId();
    if (!id.ok()) {
      std::cerr << "khorovodrun: job id: " << id.status().message() << '\n';
      return 1;
    }
    opts.job_id = std::move(*id);
  }

  // With stdout closed by a reader (`khorovodrun ... | head`) writes must
  // fail with EPIPE instead of killing the launcher and orphaning the job.
  // Workers get the default disposition back before exec.
  std::signal(SIGPIPE, SIG_IGN);

  try {
    SignalPipe signals({SIGINT, SIGTERM, SIGCHLD});
    if (opts.elastic()) return RunElasticJob(opts, signals);
    const auto ports = MetricsPortsFromEnv(CurrentEnvironment(), opts.num_proc);
    if (!ports.ok()) {
      std::cerr << "khorovodrun: " << ports.status().message() << '\n';
      return 2;
    }
    // -H/--hostfile naming other machines: their workers run over ssh.
    khorovod::StatusOr<RemotePlan> plan = PlanRemoteHosts(opts, HostNamesOf(opts.hosts), std::cerr);
    if (!plan.ok()) {
      std::cerr << "khorovodrun: " << plan.status().message() << '\n';
      return 2;
    }
    ScopedTempDir store("khorovod-store-");
    JobConfig config;
    MultiHostStaticJob multi_host;  // its store serves the workers until the supervisor returns
    if (plan->HasRemoteHosts()) {
      khorovod::StatusOr<MultiHostStaticJob> prepared =
          PrepareMultiHostStaticJob(opts, *plan, *ports);
      if (!prepared.ok()) {
        std::cerr << "khorovodrun: " << prepared.status().message() << '\n';
        return 1;
      }
      multi_host = std::move(*prepared);
      config.workers = multi_host.workers;
    } else {
      config.workers = MakeWorkerSpecs(opts, store.path(), *ports, plan->NetworkVariables());
    }
    config.grace_period = opts.grace_period;
    for (int rank = 0; rank < opts.num_proc && !opts.output_filename.empty(); ++rank) {
      khorovod::StatusOr<RankOutputFiles> files =
          OpenRankOutputFiles(opts.output_filename, rank, opts.num_proc);
      if (!files.ok()) {
        std::cerr << "khorovodrun: " << files.status().message() << '\n';
        return 2;
      }
      config.output_files.emplace(rank, std::move(*files));
    }
    if (opts.verbose) PrintWorkerSpecs(config.workers);
    JobSupervisor supervisor(std::move(config), signals);
    return supervisor.run();
  } catch (const std::exception& e) {
    std::cerr << "khorovodrun: " << e.what() << '\n';
    return 1;
  }
}
