#include "launcher/elastic_job.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "khorovod/util/random_hex.h"
#include "launcher/elastic_setup.h"
#include "launcher/horovod_messages.h"
#include "launcher/host_blacklist.h"
#include "launcher/host_discovery.h"
#include "launcher/job_supervisor.h"
#include "launcher/metrics_ports.h"
#include "launcher/remote_hosts.h"
#include "launcher/spawn_placement.h"
#include "launcher/worker_env.h"
#include "rendezvous/http_server.h"
#include "rendezvous/protocol.h"

namespace khorovod::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// A discovery script gets this long per run before it is killed.
constexpr std::chrono::milliseconds kScriptTimeout{10000};

std::string WorkerName(int id) { return "worker-" + std::to_string(id); }

// Which workers run on which host, and the decisions of elastic_job.h about
// exits and host changes. Used on the supervisor's thread only.
class ElasticPolicy {
 public:
  ElasticPolicy(
      const LaunchOptions& opts, rendezvous::RendezvousService& service, RemotePlan& plan,
      std::function<WorkerSpec(int, const std::string&, const std::optional<Placement>&)> spec_for)
      : opts_(opts),
        service_(service),
        plan_(plan),
        spec_for_(std::move(spec_for)),
        blacklist_(opts.cooldown_min_s, opts.cooldown_max_s, [this] { return jitter_(rng_); }) {}

  // Hosts named by the user (-H, --hostfile, discovery) are blacklisted when
  // a worker fails there, as Horovod; a plain -np job replaces it in place.
  bool UsesBlacklist() const {
    return !opts_.host_discovery_script.empty() || !opts_.hosts.empty();
  }

  // Sets the first host list: the discovery script's or -np slots here.
  // Returns an error message when the job cannot start.
  std::optional<std::string> InitHosts() {
    if (opts_.host_discovery_script.empty() && opts_.hosts.empty()) {
      hosts_ = {{opts_.hostname, opts_.num_proc}};
      target_cap_ = opts_.num_proc;
      return std::nullopt;
    }
    target_cap_ = opts_.max_np;
    DiscoveryResult found =
        opts_.host_discovery_script.empty()
            ? FixedHosts()
            : RunDiscoveryScript(opts_.host_discovery_script, kScriptTimeout, DefaultSlots());
    if (auto* error = std::get_if<std::string>(&found)) return "host discovery: " + *error;
    for (const auto& h : std::get<std::vector<DiscoveredHost>>(found)) {
      if (Status usable = plan_.AddDiscoveredHost(h.name); !usable.ok())
        return "host discovery: " + usable.message();
    }
    hosts_ = std::get<std::vector<DiscoveredHost>>(std::move(found));
    return std::nullopt;
  }

  std::vector<WorkerSpec> InitialWorkers() {
    std::vector<WorkerSpec> specs;
    while (auto host = FreeHost()) specs.push_back(Place(*host, Awaited::kYes));
    if (specs.empty()) empty_since_ = Clock::now();
    return specs;
  }

  bool OnExit(const WorkerExit& exit, JobControl& control) {
    const bool handled = HandleExit(exit, control);
    // Only now, with its host blacklisted and its other workers evicted if
    // it failed, may the rendezvous form the next generation without it.
    service_.Exited(WorkerName(exit.rank));
    return handled;
  }

  void OnTick(JobControl& control) {
    if (finishing_) return;
    if (opts_.host_discovery_script.empty() && UsesBlacklist())
      Reconcile(control, Awaited::kYes);  // cooldowns end
    if (!opts_.host_discovery_script.empty()) {
      DiscoveryResult found =
          RunDiscoveryScript(opts_.host_discovery_script, kScriptTimeout, DefaultSlots());
      if (auto* error = std::get_if<std::string>(&found)) {
        if (*error != last_error_)
          control.message("host discovery: " + *error + "; keeping the last host list");
        last_error_ = *error;
      } else {
        last_error_.clear();
        std::vector<DiscoveredHost> hosts;
        for (auto& h : std::get<std::vector<DiscoveredHost>>(found)) {
          if (Status usable = plan_.AddDiscoveredHost(h.name); usable.ok()) {
            hosts.push_back(std::move(h));
          } else if (reported_unusable_.insert(h.name).second) {
            control.message("host discovery: " + usable.message() + "; ignoring it");
          }
        }
        hosts_ = std::move(hosts);
      }
      Reconcile(control, Awaited::kYes);
    }
    if (running_.empty() && empty_since_ && Clock::now() - *empty_since_ >= opts_.elastic_timeout) {
      control.fail("no worker has been running for " +
                       std::to_string(opts_.elastic_timeout.count()) +
                       " s (--elastic-timeout); giving up",
                   1);
    }
  }

  // With discovery, a job whose hosts all went away waits for new ones; so
  // does one whose hosts are all cooling down.
  bool hold_open() const {
    return !finishing_ &&
           (!opts_.host_discovery_script.empty() || (UsesBlacklist() && opts_.cooldown_min_s > 0));
  }

 private:
  // The policy's decision on one exit (see OnExit).
  bool HandleExit(const WorkerExit& exit, JobControl& control) {
    const int id = exit.rank;
    const auto where = running_.find(id);
    const std::string host = where == running_.end() ? std::string() : where->second;
    running_.erase(id);
    if (stopping_.erase(id) > 0) {
      AfterLoss(control);
      return true;  // we stopped it because its host went away
    }
    if (exit.status.Success()) {
      // The program's training loop returned: the job is ending. Nobody is
      // started any more (a newcomer would wait for a generation that never
      // forms); the others are waited for.
      if (!finishing_ && !running_.empty()) {
        control.message("worker " + std::to_string(id) +
                        " finished (exit 0); the job is ending, no workers will be started");
      }
      finishing_ = true;
      (void)service_.Leave(WorkerName(id),
                           rendezvous::kLeaveFinished);  // late joiners are told to exit
      return true;
    }
    // Survivors re-form now instead of after a heartbeat timeout.
    (void)service_.ReportFailure(WorkerName(id), exit.status.Describe());
    const std::string what = "worker " + std::to_string(id) + " (pid " + std::to_string(exit.pid) +
                             ") " + exit.status.Describe();
    if (first_failure_.empty())
      first_failure_ = "worker " + std::to_string(id) + (host.empty() ? "" : " on " + host);
    if (auto reason = RendezvousFailure()) {  // e.g. its reset limit: nothing to replace
      control.fail(what + "; " + *reason, exit.status.ShellCode());
      return true;
    }
    if (finishing_ || failures_ >= opts_.reset_limit) return false;  // fails the job
    ++failures_;
    if (UsesBlacklist() && !host.empty()) {
      BlacklistHost(host, control);
      if (!hosts_.empty() &&
          std::all_of(hosts_.begin(), hosts_.end(), [&](const DiscoveredHost& h) {
            return blacklist_.IsBlacklisted(h.name, Clock::now());
          })) {  // Horovod's driver stops here too (registration.py)
        control.fail(what + "; every host is blacklisted; " +
                         ProcessesFailedMessage(first_failure_, exit.status.ShellCode()),
                     exit.status.ShellCode());
        return true;
      }
    }
    control.message("worker " + std::to_string(id) + " (pid " + std::to_string(exit.pid) + ") " +
                    exit.status.Describe() + "; replacing it (" + std::to_string(failures_) +
                    " of --reset-limit " + std::to_string(opts_.reset_limit) + ")");
    Reconcile(control, Awaited::kNo);  // the survivors go on without waiting for the replacement
    AfterLoss(control);
    return true;
  }

  int DefaultSlots() const { return opts_.slots_per_host > 0 ? opts_.slots_per_host : 1; }

  // -H / --hostfile in elastic mode: the fixed host list (Horovod's FixedHosts).
  DiscoveryResult FixedHosts() const {
    std::string lines = opts_.hosts;
    std::replace(lines.begin(), lines.end(), ',', '\n');
    return ParseDiscoveryOutput(lines, DefaultSlots());
  }

  void BlacklistHost(const std::string& host, JobControl& control) {
    blacklist_.Fail(host, Clock::now());
    const auto end = blacklist_.CooldownEnd(host);
    control.message("host " + host + " blacklisted" +
                    (end ? " for " +
                               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  *end - Clock::now())
                                                  .count()) +
                               " ms (--blacklist-cooldown-range)"
                         : std::string(" for the rest of the job")));
  }
  // The rendezvous' reason when it has failed the job (in horovodrun's words
  // for its reset limit), nullopt while the job goes on.
  std::optional<std::string> RendezvousFailure() {
    const rendezvous::Reply status = service_.JobStatus();
    if (status.body.value("state", std::string()) != "failed") return std::nullopt;
    const std::string reason = status.body.value("failure_reason", std::string());
    if (reason.rfind("reset limit", 0) == 0) {
      return "the rendezvous failed the job: " + reason + "; " +
             ResetLimitExceededMessage(opts_.reset_limit);
    }
    return "the rendezvous failed the job: " + reason;
  }

  int SlotsOf(const std::string& host) const {
    if (blacklist_.IsBlacklisted(host, Clock::now())) return 0;
    for (const auto& h : hosts_) {
      if (h.name == host) return h.slots;
    }
    return 0;
  }

  int Target() const {
    long long slots = 0;
    for (const auto& h : hosts_) slots += SlotsOf(h.name);
    return static_cast<int>(std::min<long long>(slots, target_cap_));
  }

  std::optional<std::string> FreeHost() const {
    if (static_cast<int>(running_.size()) >= Target()) return std::nullopt;
    for (const auto& h : hosts_) {
      const auto used = std::count_if(running_.begin(), running_.end(),
                                      [&](const auto& w) { return w.second == h.name; });
      if (used < SlotsOf(h.name)) return h.name;
    }
    return std::nullopt;
  }

  // Whether the rendezvous awaits a new worker (Membership's spawned
  // workers): the members hear of it at once and re-form with it, as
  // Horovod's driver does for the hosts it discovers. A replacement for a
  // failed worker of a plain -np job (khorovod's own, Horovod has none) is
  // not: the survivors re-form without it and it joins once it is up.
  enum class Awaited { kNo, kYes };

  // Starts worker `id` on the lowest slot of `host` no running worker holds,
  // with the placement Horovod's driver would export for that slot.
  WorkerSpec Place(const std::string& host, Awaited awaited) {
    const int id = next_id_++;
    std::set<int> held;
    for (const auto& [other, other_host] : running_) {
      if (other_host == host) held.insert(local_of_[other]);
    }
    int local = 0;
    while (held.count(local)) ++local;
    running_[id] = host;
    local_of_[id] = local;
    empty_since_.reset();
    std::vector<DiscoveredHost> usable;
    for (const auto& h : hosts_) usable.push_back({h.name, SlotsOf(h.name)});
    StatusOr<Placement> placement = SpawnPlacement(usable, target_cap_, host, local);
    // Registering the worker now, in spawn order, gives it its place in the
    // rendezvous' line (its own registration keeps it): a generation of
    // newcomers is then ranked in spawn order, host by host, as Horovod's
    // driver ranks it, whichever process comes up first. Not ready until the
    // worker asks for a generation itself; as spawned, it does not expire
    // for silence before its process is up (a framework import may take
    // longer than the heartbeat timeout), and it may be awaited (Awaited).
    rendezvous::WorkerSpec spawned{WorkerName(id), WorkerAddress(host), opts_.max_np};
    spawned.spawned = true;
    spawned.awaited = awaited == Awaited::kYes;
    (void)service_.Register(spawned);
    return spec_for_(id, host,
                     placement.ok() ? std::optional<Placement>(*placement) : std::nullopt);
  }

  // The address a worker on `host` advertises (KHOROVOD_HOSTNAME).
  std::string WorkerAddress(const std::string& host) const {
    return opts_.hosts_run_locally ? opts_.hostname : plan_.AdvertisedAddress(host);
  }

  void AfterLoss(JobControl&) {
    if (running_.empty() && !empty_since_) empty_since_ = Clock::now();
  }

  // Stops workers on hosts that went away or shrank (newest first), then
  // starts workers on free slots up to the target.
  void Reconcile(JobControl& control, Awaited awaited) {
    if (finishing_) return;
    std::map<std::string, int> kept;
    std::vector<int> to_stop;
    for (const auto& [id, host] : running_) {  // oldest first: they keep their slots
      if (++kept[host] > SlotsOf(host)) to_stop.push_back(id);
    }
    for (int id : to_stop) {
      const std::string host = running_[id];
      control.message("host " + host + " is gone or has fewer slots; stopping worker " +
                      std::to_string(id));
      control.stop(id);
      // Fenced too: its process must not rejoin the next generation under
      // its name before the SIGTERM ends it (Horovod's removed worker fails
      // its next rendezvous).
      (void)service_.Evict(WorkerName(id), "host " + host + " removed by host discovery");
      stopping_.insert(id);
      running_.erase(id);
    }
    while (auto host = FreeHost()) {
      WorkerSpec spec = Place(*host, awaited);
      control.message("starting worker " + std::to_string(spec.rank) + " on " + *host);
      control.start(std::move(spec));
    }
    AfterLoss(control);
  }

  const LaunchOptions& opts_;
  rendezvous::RendezvousService& service_;
  RemotePlan& plan_;
  std::function<WorkerSpec(int, const std::string&, const std::optional<Placement>&)> spec_for_;
  std::mt19937 rng_{std::random_device{}()};
  std::uniform_real_distribution<double> jitter_{0.0, 1.0};
  HostBlacklist blacklist_;
  std::vector<DiscoveredHost> hosts_;
  int target_cap_ = 0;                  // -np without discovery, --max-np with it
  std::map<int, std::string> running_;  // worker id -> host, not being stopped
  std::map<int, int> local_of_;
  std::string first_failure_;  // the first worker that failed, for the job's failure line // worker
                               // id -> its slot on its host
  std::set<int> stopping_;     // SIGTERMed because their host went away
  std::set<std::string> reported_unusable_;
  std::string last_error_;
  std::optional<Clock::time_point> empty_since_;
  int next_id_ = 0;
  int failures_ = 0;
  bool finishing_ = false;  // a worker exited 0
};

// What each worker is started with: the command, the launcher's environment
// with -x, the rendezvous' address and token, its name and Horovod's
// variables for its slot, and a metrics port. A worker takes the lowest
// metrics slot no live worker holds, so a replacement reuses the port of
// the worker it replaces.
class WorkerSpecs {
 public:
  WorkerSpecs(const LaunchOptions& opts, const RemotePlan& plan, std::vector<std::string> base_env,
              std::vector<EnvVar> extra, const MetricsPorts& ports, std::string address,
              std::string token)
      : opts_(opts),
        plan_(plan),
        base_env_(std::move(base_env)),
        extra_(std::move(extra)),
        ports_(ports),
        address_(std::move(address)),
        token_(std::move(token)) {}

  WorkerSpec For(int id, const std::string& host, const std::optional<Placement>& spawn) {
    std::vector<EnvVar> vars = extra_;
    if (ports_.enabled())
      vars.push_back({"KHOROVOD_METRICS_PORT", std::to_string(ports_.worker(TakeSlot(id)))});
    vars.push_back({"KHOROVOD_RENDEZVOUS_ADDR", address_});
    vars.push_back({"KHOROVOD_RENDEZVOUS_TOKEN", token_});
    vars.push_back({"KHOROVOD_WORKER_NAME", WorkerName(id)});
    vars.push_back({"KHOROVOD_SLOTS", std::to_string(opts_.max_np)});
    vars.push_back({"KHOROVOD_JOB_ID", opts_.job_id});
    const bool remote = plan_.IsRemote(host);
    vars.push_back({"KHOROVOD_HOSTNAME",
                    opts_.hosts_run_locally ? opts_.hostname : plan_.AdvertisedAddress(host)});
    // Horovod's HOROVOD_HOSTNAME: the host's name as listed.
    const std::string listed = opts_.hosts_run_locally || remote ? host : plan_.LauncherAddress();
    for (EnvVar& v : ElasticHorovodVariables(listed, spawn)) vars.push_back(std::move(v));
    for (EnvVar& v : plan_.NetworkVariables()) vars.push_back(std::move(v));
    vars.push_back(
        {"KHOROVOD_ELASTIC_TIMEOUT_SECONDS", std::to_string(opts_.elastic_timeout.count())});
    WorkerSpec spec;
    spec.rank = id;
    spec.argv = opts_.command;
    spec.env = MergeEnvironment(base_env_, vars);
    return remote ? plan_.RemoteWorker(spec, host) : spec;
  }

  // Worker `id` exited: its metrics slot is free (before a replacement starts).
  void Release(int id) { slot_of_.erase(id); }

 private:
  int TakeSlot(int id) {
    std::set<int> used;
    for (const auto& [w, slot] : slot_of_) used.insert(slot);
    int slot = 0;
    while (used.count(slot)) ++slot;
    return slot_of_[id] = slot;
  }

  const LaunchOptions& opts_;
  const RemotePlan& plan_;
  const std::vector<std::string> base_env_;
  const std::vector<EnvVar> extra_;
  const MetricsPorts ports_;
  const std::string address_;
  const std::string token_;
  std::map<int, int> slot_of_;  // live worker id -> metrics slot
};

// The supervisor's configuration: the first workers, and the policy's say
// on every exit, tick and empty moment.
JobConfig ElasticJobConfig(const LaunchOptions& opts, ElasticPolicy& policy, WorkerSpecs& specs) {
  JobConfig config;
  config.workers = policy.InitialWorkers();
  config.grace_period = opts.grace_period;
  config.on_exit = [&policy, &specs](const WorkerExit& exit, JobControl& control) {
    specs.Release(exit.rank);  // before the policy may start a replacement
    return policy.OnExit(exit, control);
  };
  config.hold_open = [&policy] { return policy.hold_open(); };
  if (!opts.host_discovery_script.empty() || !opts.hosts.empty()) {
    config.on_tick = [&policy](JobControl& control) { policy.OnTick(control); };
    config.tick_interval = opts.discovery_interval;
  }
  return config;
}

}  // namespace

int RunElasticJob(const LaunchOptions& opts, SignalPipe& signals) {
  // Remote hosts are checked before anything starts; the rendezvous then
  // listens where they can reach it.
  StatusOr<RemotePlan> plan =
      PlanRemoteHosts(opts, InitialHostNames(opts, kScriptTimeout), std::cerr);
  if (!plan.ok()) {
    std::cerr << "khorovodrun: " << plan.status().message() << '\n';
    return 2;
  }
  StatusOr<std::string> token = RandomHex(32);
  if (!token.ok()) {
    std::cerr << "khorovodrun: rendezvous token: " << token.status().message() << "\n";
    return 1;
  }
  const auto launcher_env = CurrentEnvironment();
  // With host discovery up to --max-np workers run at once.
  const StatusOr<MetricsPorts> ports =
      MetricsPortsFromEnv(launcher_env, std::max(opts.num_proc, opts.max_np));
  if (!ports.ok()) {
    std::cerr << "khorovodrun: " << ports.status().message() << '\n';
    return 2;
  }
  rendezvous::RendezvousServer server(
      ServerOptionsFor(opts, plan->LauncherAddress(), *token, *ports));
  if (Status s = server.Start(); !s.ok()) {
    std::cerr << "khorovodrun: cannot start the rendezvous server: " << s.message() << '\n';
    return 1;
  }
  ResolvedExtraEnv extra = ResolveExtraEnv(opts.extra_env, launcher_env);
  for (const auto& name : extra.missing) {
    std::cerr << "khorovodrun: warning: -x " << name << " is not set here; not passing it\n";
  }
  const std::string address = plan->LauncherAddress() + ":" + std::to_string(server.port());
  WorkerSpecs specs(opts, *plan, launcher_env, std::move(extra.vars), *ports, address, *token);
  ElasticPolicy policy(
      opts, server.service(), *plan,
      [&specs](int id, const std::string& host, const std::optional<Placement>& spawn) {
        return specs.For(id, host, spawn);
      });
  if (auto problem = policy.InitHosts()) {
    std::cerr << "khorovodrun: " << *problem << '\n';
    server.Stop();
    return 2;
  }
  JobConfig config = ElasticJobConfig(opts, policy, specs);
  std::cerr << "khorovodrun: elastic job " << opts.job_id << ": " << config.workers.size()
            << " workers (min " << opts.min_np << ", max " << opts.max_np << "), rendezvous on "
            << address << '\n';
  JobSupervisor supervisor(std::move(config), signals);
  const int result = supervisor.run();
  server.Stop();
  return result;
}

}  // namespace khorovod::launcher
