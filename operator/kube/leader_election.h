// LeaderElector: leader election through a coordination.k8s.io/v1 Lease.
//
// A candidate becomes leader when the Lease does not exist, names it as
// holder, or has not been renewed for leaseDurationSeconds. The leader renews
// every `retry_period`; if it cannot renew within `renew_deadline` it gives
// up leadership (on_stopped_leading), because another replica may already
// have taken over. Updates use the Lease's resourceVersion, so two
// candidates racing for an expired lease cannot both win.
//
// Thread-safety: Run blocks on the calling thread; IsLeader and Stop may be
// called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "khorovod/util/mutex.h"
#include "kube/rest_client.h"

namespace khorovod::kube {

struct LeaderElectionOptions {
  std::string lease_namespace = "default";
  std::string lease_name = "khorovod-operator";
  std::string identity;  // unique per replica (pod name + random suffix)
  std::chrono::seconds lease_duration{15};
  std::chrono::seconds renew_deadline{10};
  std::chrono::seconds retry_period{2};
};

class LeaderElector {
 public:
  LeaderElector(RestClient& client, LeaderElectionOptions options);

  // Campaigns until Stop(); calls on_started once leadership is acquired and
  // on_stopped if it is lost afterwards (then Run returns).
  void Run(const std::function<void()>& on_started, const std::function<void()>& on_stopped);
  void Stop();
  bool IsLeader() const { return leader_.load(); }
  // Releases the lease (holder cleared) if held, so a successor need not wait.
  void Release();

 private:
  // One acquire-or-renew attempt; true when this candidate holds the lease.
  bool TryAcquireOrRenew();
  bool Wait(std::chrono::milliseconds d);

  RestClient& client_;
  const LeaderElectionOptions options_;
  std::atomic<bool> leader_{false};
  std::atomic<bool> stop_{false};
  Mutex mu_;
  std::condition_variable cv_;
};

// RFC 3339 with microseconds, as Kubernetes MicroTime ("2026-11-22T12:00:00.000000Z").
std::string MicroTimeNow();
// Parses MicroTime or Time; returns false if malformed.
bool ParseTime(const std::string& text, std::chrono::system_clock::time_point& out);

}  // namespace khorovod::kube
