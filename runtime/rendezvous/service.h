// RendezvousService: the rendezvous server's logic, independent of HTTP.
//
// It owns the job's Membership (under one mutex) and KvStore, runs a ticker
// thread that applies the membership timeouts every 20 ms, implements the
// bounded long-polls, and shapes every answer as a Reply: an HTTP status and
// a JSON body. Arguments arrive already type-checked by the HTTP layer
// (http_server.cc); semantic checks (names, generations, limits) happen here
// or in Membership. The JSON bodies are documented in README.md.
//
// Waits: AwaitNext, KvGet and KvWait block for at most
// min(timeout, ServiceOptions::max_wait), and return at once after
// Shutdown() (503 shutting_down). KvGet and KvWait in a generation that will
// never finish forming (replaced by a newer one, lost a member, a member
// already asked for the next one, or the job failed) answer 410
// generation_over at once instead of waiting for keys that may never come.
//
// Thread-safety: all public methods are thread-safe; many HTTP threads call
// them concurrently.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "khorovod/metrics/exposition.h"
#include "khorovod/util/mutex.h"
#include "kv_store.h"
#include "membership.h"

namespace khorovod::rendezvous {

struct ServiceOptions {
  std::string job = "job";
  MembershipPolicy policy;
  Millis max_wait{30000};  // cap on any single long-poll
  size_t kv_max_bytes = size_t(256) << 20;
  bool log = true;  // one line per event on stderr
};

struct Reply {
  int status = 200;
  nlohmann::json body = nlohmann::json::object();
};

// {"error": message, "code": code} with the given status.
Reply ErrorReply(int status, const char* code, std::string message);

class RendezvousService {
 public:
  explicit RendezvousService(ServiceOptions options);
  ~RendezvousService();  // calls Shutdown()
  RendezvousService(const RendezvousService&) = delete;
  RendezvousService& operator=(const RendezvousService&) = delete;

  // Wakes every waiter, stops the ticker. Idempotent.
  void Shutdown();

  const std::string& job() const { return options_.job; }
  // Random per process: lets clients notice a server restart.
  const std::string& server_id() const { return server_id_; }

  Reply Register(const WorkerSpec& spec);
  // `incarnation`: the calling process's id ("" skips the check); a fenced
  // one is answered 410 worker_fenced (Membership's Fencing).
  Reply Heartbeat(const std::string& name, const std::string& incarnation = "");
  Reply Leave(const std::string& name, const std::string& reason,
              const std::string& incarnation = "");
  // The launcher removes a worker whose host went away (Membership::Evict).
  Reply Evict(const std::string& name, const std::string& reason);
  // The launcher saw worker `name`'s process exit (Membership::Exited).
  void Exited(const std::string& name);
  Reply ReportFailure(const std::string& name, const std::string& reason,
                      const std::string& incarnation = "");
  Reply AwaitNext(const std::string& name, int64_t after, Millis timeout,
                  const std::string& incarnation = "");
  Reply JobStatus();

  Reply KvSet(int64_t generation, const std::string& key, std::string value);
  Reply KvGet(int64_t generation, const std::string& key, Millis timeout);
  Reply KvAdd(int64_t generation, const std::string& key, int64_t delta);
  Reply KvWait(int64_t generation, const std::vector<std::string>& keys, Millis timeout);

  // Counts one HTTP response by status code (for /metrics).
  void CountResponse(int status);
  // The Prometheus text exposition of the server's metrics (the names are
  // listed in docs/observability.md).
  std::string Metrics() const;

 private:
  using Clock = std::chrono::steady_clock;
  Reply FromMembership(const MembershipResult& r) REQUIRES(mu_);
  // The 410 answer when `incarnation` is fenced under `name` (409
  // job_finishing once the job is finishing); mu_ held.
  std::optional<Reply> Fenced(const std::string& name, const std::string& incarnation)
      REQUIRES(mu_);
  void AfterChange() REQUIRES(mu_);
  Reply CheckKvGeneration(int64_t generation) EXCLUDES(mu_);  // status 0 when fine
  Clock::time_point DeadlineFor(Millis timeout) const;
  void TickerLoop();
  void InstallMetrics();
  void Log(const std::string& line);

  const ServiceOptions options_;
  const std::string server_id_;

  Mutex mu_;
  std::condition_variable cv_;  // generation changed, job failed, or shutdown
  Membership membership_ GUARDED_BY(mu_);
  int64_t seen_generation_ GUARDED_BY(mu_) = 0;
  bool seen_failed_ GUARDED_BY(mu_) = false;
  int64_t kv_closed_through_ GUARDED_BY(mu_) = 0;  // KV generations 1..this no longer block
  bool stopping_ GUARDED_BY(mu_) = false;

  KvStore kv_;
  std::thread ticker_;

  prometheus::Registry registry_;
  prometheus::Histogram* formation_seconds_ = nullptr;         // owned by registry_
  std::array<prometheus::Histogram*, 4> detection_seconds_{};  // by LossReason; owned by registry_
  std::unique_ptr<metrics::ScrapeCollector> membership_metrics_;  // read under mu_ at scrape time
  Mutex log_mu_;
};

}  // namespace khorovod::rendezvous
