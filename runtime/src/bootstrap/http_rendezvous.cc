// The elastic Rendezvous: membership and generations come from the job's
// khorovod-rendezvous server; Gloo contexts meet through its key-value store.
// A heartbeat thread keeps this worker alive on the server and records when
// the server announces a membership change.
#include <gloo/transport/tcp/device.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "bootstrap/gloo_bootstrap.h"
#include "bootstrap/gloo_mesh.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/rendezvous_endpoint.h"
#include "bootstrap/termination_watch.h"
#include "http_store.h"
#include "khorovod/util/mutex.h"
#include "protocol.h"
#include "rendezvous_client.h"

namespace khorovod {
namespace {

using rendezvous::HttpEndpoint;
using rendezvous::HttpStore;
using rendezvous::RendezvousClient;

class HttpRendezvous final : public Rendezvous {
 public:
  HttpRendezvous(HttpEndpoint endpoint, const Config& config)
      : endpoint_(std::move(endpoint)),
        job_(config.job_id),
        elastic_timeout_(config.elastic_timeout),
        client_(endpoint_, config.job_id,
                rendezvous::WorkerIdentity{config.worker_name, config.hostname, config.slots,
                                           config.local_slot,
                                           // Only counting by node needs it (and
                                           // a server older than "node" refuses it).
                                           config.local_ranks_by_node ? config.node_name : ""}),
        // Kubernetes stops a scaled-down pod with SIGTERM: leave at once so
        // the survivors re-form now, not after the grace period and a
        // missed heartbeat.
        termination_grace_(config.termination_grace),
        termination_(TerminationWatch::Install([this] { OnSigterm(); })) {}

  ~HttpRendezvous() override {
    {
      MutexLock lock(term_mu_);
      term_cancel_ = true;
    }
    term_cv_.notify_all();
    StopHeartbeats();
  }

  StatusOr<Assignment> NextGeneration(int64_t previous) override {
    if (previous < 0) KH_RETURN_IF_ERROR(client_.Register(elastic_timeout_));
    auto g = client_.WaitForNextGeneration(elastic_timeout_);
    if (!g.ok()) return g.status();
    // Heartbeats answered while this worker waited describe the old world.
    generation_.store(g->generation);
    changed_.store(false);
    StartHeartbeats();
    Assignment a;
    a.generation = g->generation;
    static_cast<Placement&>(a) = *g;
    a.by_node = g->by_node;
    return a;
  }

  StatusOr<std::shared_ptr<gloo::Context>> Connect(const Assignment& a,
                                                   const Config& config) override {
    try {
      auto device = gloo::transport::tcp::CreateDevice(GlooDeviceAttr(config));
      rendezvous::HttpStoreOptions options;
      options.timeout = config.transport_timeout;
      HttpStore store(endpoint_, job_, a.generation, options);
      MeshOptions mesh;
      mesh.rank = a.rank;
      mesh.size = a.size;
      mesh.timeout = config.transport_timeout;
      // A peer that died after publishing its address would otherwise hold
      // this survivor in Gloo's connect long after the rendezvous moved on.
      mesh.abandon = [this] { return changed_.load(); };
      auto context = ConnectAbandonableMesh(store, device, mesh);
      if (!context.ok()) return Failed(a, context.status().message());
      {
        MutexLock lock(mu_);
        running_ = RunningMesh{a.generation, *context};
      }
      return context;
    } catch (const std::exception& e) {
      return Failed(a, e.what());
    }
  }

  bool MembershipChanged() const override {
    if (!term_requested_.load()) return changed_.load();
    term_announced_.store(true);  // this commit's agreement says "re-form"
    return true;
  }

  void AtCommitBoundary() override {
    commits_seen_.store(true);
    if (!term_announced_.load()) return;
    // Every rank agreed to re-form at this commit, which every rank holds:
    // the survivors go on from it, and nothing is rolled back.
    StopHeartbeats();
    (void)client_.Leave("terminated by SIGTERM; left at commit");
    std::fprintf(stderr, "khorovod elastic: SIGTERM: left the job at a commit; ending\n");
    TerminationWatch::EndAsSigterm();
  }

  void ReportFailure(int64_t generation, const std::string& reason) override {
    (void)client_.ReportFailure("generation " + std::to_string(generation) + ": " + reason);
  }

  void Leave(bool training_finished) override {
    StopHeartbeats();
    (void)client_.Leave(training_finished ? rendezvous::kLeaveFinished : "shutdown");
  }

  bool elastic() const override { return true; }

 private:
  // On the TerminationWatch's thread. A worker that commits leaves at its
  // next commit (AtCommitBoundary, on the training thread), within the
  // grace; otherwise, or past the grace, it leaves now and the process ends
  // on return (the survivors then roll back to their last commit).
  void OnSigterm() {
    if (commits_seen_.load() && termination_grace_.count() > 0) {
      term_requested_.store(true);
      MutexLock lock(term_mu_);
      // The training thread normally ends the process first; the runtime
      // shutting down (training over) ends the wait early.
      const auto cancelled = [&]() REQUIRES(term_mu_) { return term_cancel_; };
      if (lock.WaitFor(term_cv_, termination_grace_, cancelled)) return LeaveOnSigterm();
      std::fprintf(stderr, "khorovod elastic: SIGTERM: no commit within %lld ms; leaving now\n",
                   static_cast<long long>(termination_grace_.count()));
    }
    LeaveOnSigterm();
  }
  void LeaveOnSigterm() { (void)client_.Leave("terminated by SIGTERM"); }

  void StartHeartbeats() {
    MutexLock lock(mu_);
    if (heartbeat_.joinable()) return;
    heartbeat_ = std::thread([this] {
      MutexLock lock(mu_);
      while (!stop_) {
        const auto interval = client_.heartbeat_interval();
        lock.Unlock();
        auto info = client_.Heartbeat();
        if (info.ok() && Outdated(*info)) changed_.store(true);
        if (info.ok()) AbandonIfDoomed(*info);
        lock.Lock();
        lock.WaitFor(cv_, interval, [&]() REQUIRES(mu_) { return stop_; });
      }
    });
  }

  static Status Failed(const Assignment& a, const std::string& why) {
    return Status::Unavailable("generation " + std::to_string(a.generation) + ": rank " +
                               std::to_string(a.rank) + " could not connect to its peers: " + why);
  }

  // Whether a heartbeat answer means the running generation must re-form.
  bool Outdated(const rendezvous::HeartbeatInfo& info) const {
    const int64_t mine = generation_.load();
    if (info.job_failed || info.fenced || info.reregistered || info.forgotten ||
        info.generation > mine)
      return true;
    return info.generation == mine && (info.membership_changed || !info.active);
  }

  // Whether a heartbeat answer means the running generation can no longer
  // finish a collective: a member is gone or went back to the rendezvous, a
  // newer generation formed, or the server no longer counts this worker in.
  bool Doomed(const rendezvous::HeartbeatInfo& info) const {
    const int64_t mine = generation_.load();
    if (info.job_failed || info.fenced || info.reregistered || info.forgotten ||
        info.generation > mine)
      return true;
    return info.generation == mine && (info.reforming || !info.active);
  }

  // A peer that left this generation while this rank waits on it (e.g. for
  // a send it will never take) closes no socket this rank is watching, so
  // only the transport timeout would end the wait, while the others wait at
  // the rendezvous for this rank. Failing the mesh ends it now; the failure
  // sends this rank back to the rendezvous like any other. Committed state is
  // safe: commit() snapshots before its agreement round.
  void AbandonIfDoomed(const rendezvous::HeartbeatInfo& info) {
    if (!Doomed(info)) return;
    std::shared_ptr<gloo::Context> context;
    int64_t generation = 0;
    {
      MutexLock lock(mu_);
      if (running_.generation != generation_.load()) return;
      generation = running_.generation;
      context = running_.context.lock();
      running_ = RunningMesh{};
    }
    if (!context) return;
    const std::string why =
        "generation " + std::to_string(generation) +
        " can no longer finish: the rendezvous reports it lost a member or is re-forming";
    std::fprintf(stderr, "khorovod elastic: %s; abandoning its connections\n", why.c_str());
    AbandonMesh(*context, why);
  }

  void StopHeartbeats() {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
  }

  HttpEndpoint endpoint_;
  std::string job_;
  std::chrono::milliseconds elastic_timeout_;
  RendezvousClient client_;
  // The mesh of the generation this worker runs in, for AbandonIfDoomed.
  struct RunningMesh {
    int64_t generation = -1;
    std::weak_ptr<gloo::Context> context;
  };
  RunningMesh running_ GUARDED_BY(mu_);
  std::atomic<bool> changed_{false};
  std::atomic<int64_t> generation_{-1};
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread heartbeat_;
  // SIGTERM deferred to a commit (OnSigterm, AtCommitBoundary).
  std::atomic<bool> commits_seen_{false};
  std::atomic<bool> term_requested_{false};
  mutable std::atomic<bool> term_announced_{false};
  const std::chrono::milliseconds termination_grace_;
  Mutex term_mu_;
  std::condition_variable term_cv_;
  bool term_cancel_ GUARDED_BY(term_mu_) = false;
  // Last: destroyed first, so its thread never sees a half-destroyed client.
  std::unique_ptr<TerminationWatch> termination_;
};

}  // namespace

StatusOr<std::unique_ptr<Rendezvous>> MakeHttpRendezvous(const Config& config) {
  StatusOr<HttpEndpoint> endpoint = ParseRendezvousEndpoint(
      "KHOROVOD_RENDEZVOUS_ADDR", config.rendezvous_addr, config.rendezvous_token);
  if (!endpoint.ok()) return endpoint.status();
  if (config.rendezvous_token.empty()) {
    return Status::InvalidArgument(
        "elastic jobs need the job's rendezvous token: set KHOROVOD_RENDEZVOUS_TOKEN or "
        "KHOROVOD_RENDEZVOUS_TOKEN_FILE");
  }
  return std::unique_ptr<Rendezvous>(
      std::make_unique<HttpRendezvous>(std::move(*endpoint), config));
}

}  // namespace khorovod
