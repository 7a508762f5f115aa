// RendezvousMonitor: keeps the last known status of each live job's
// rendezvous server, polled on its own thread so that reconciles never wait
// on a pod's network.
//
// The reconciler tells it which rendezvous to watch (Track, with the job's
// key, UID and the rendezvous pod's address) and reads the cached generation
// (Generation). A newly tracked or moved target is polled at once, then every
// `interval`; each poll is bounded by `timeout`. When a job's generation
// changes, on_change(key) is called from the monitor's thread (the
// controller enqueues the key), so status.rendezvousGeneration follows
// re-formations without periodic reconciles.
//
// Thread-safety: Track, Untrack and Generation from any thread; Start and
// Stop from the owner. on_change runs on the monitor's thread with no lock
// held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "controller/rendezvous_status.h"
#include "khorovod/util/mutex.h"

namespace khorovod::op {

struct RendezvousMonitorOptions {
  std::chrono::milliseconds interval{15000};
  std::chrono::milliseconds timeout{500};
};

using RendezvousFetcher = std::function<std::optional<RendezvousStatus>(
    const std::string& ip, int port, std::chrono::milliseconds timeout)>;

class RendezvousMonitor {
 public:
  RendezvousMonitor(RendezvousMonitorOptions options,
                    std::function<void(const std::string& key)> on_change,
                    RendezvousFetcher fetch = FetchRendezvousStatus);
  ~RendezvousMonitor();
  RendezvousMonitor(const RendezvousMonitor&) = delete;
  RendezvousMonitor& operator=(const RendezvousMonitor&) = delete;

  void Start();
  void Stop();  // idempotent; joins the thread

  // Watch the rendezvous of job `key` (incarnation `uid`) at ip:port. A new
  // UID forgets what was known about an older job of the same name.
  void Track(const std::string& key, const std::string& uid, const std::string& ip, int port);
  void Untrack(const std::string& key);
  // The last generation read for this incarnation, if any.
  std::optional<int64_t> Generation(const std::string& key, const std::string& uid) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Target {
    std::string uid, ip;
    int port = 0;
    std::optional<int64_t> generation;
    Clock::time_point next_poll;
  };
  void Loop();
  // Polls the targets that are due; returns the keys whose generation changed.
  std::vector<std::string> PollDue();

  const RendezvousMonitorOptions options_;
  const std::function<void(const std::string&)> on_change_;
  const RendezvousFetcher fetch_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Target> targets_ GUARDED_BY(mu_);  // by job key
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace khorovod::op
