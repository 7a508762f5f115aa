#include "controller/rendezvous_monitor.h"

#include <vector>

namespace khorovod::op {

RendezvousMonitor::RendezvousMonitor(RendezvousMonitorOptions options,
                                     std::function<void(const std::string&)> on_change,
                                     RendezvousFetcher fetch)
    : options_(options), on_change_(std::move(on_change)), fetch_(std::move(fetch)) {}

RendezvousMonitor::~RendezvousMonitor() { Stop(); }

void RendezvousMonitor::Start() {
  MutexLock lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void RendezvousMonitor::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RendezvousMonitor::Track(const std::string& key, const std::string& uid, const std::string& ip,
                              int port) {
  MutexLock lock(mu_);
  Target& t = targets_[key];
  if (t.uid == uid && t.ip == ip && t.port == port) return;
  if (t.uid != uid) t.generation.reset();
  t.uid = uid;
  t.ip = ip;
  t.port = port;
  t.next_poll = Clock::now();
  cv_.notify_all();
}

void RendezvousMonitor::Untrack(const std::string& key) {
  MutexLock lock(mu_);
  targets_.erase(key);
}

std::optional<int64_t> RendezvousMonitor::Generation(const std::string& key,
                                                     const std::string& uid) const {
  MutexLock lock(mu_);
  auto it = targets_.find(key);
  if (it == targets_.end() || it->second.uid != uid) return std::nullopt;
  return it->second.generation;
}

std::vector<std::string> RendezvousMonitor::PollDue() {
  struct Due {
    std::string key, uid, ip;
    int port;
  };
  std::vector<Due> due;
  {
    MutexLock lock(mu_);
    const auto now = Clock::now();
    for (auto& [key, t] : targets_) {
      if (t.next_poll > now) continue;
      due.push_back({key, t.uid, t.ip, t.port});
      t.next_poll = now + options_.interval;
    }
  }
  std::vector<std::string> changed;
  for (const Due& d : due) {
    std::optional<RendezvousStatus> status = fetch_(d.ip, d.port, options_.timeout);
    if (!status) continue;  // keep the last known value
    MutexLock lock(mu_);
    auto it = targets_.find(d.key);
    // Skip answers for a target that was untracked or moved meanwhile.
    if (it == targets_.end() || it->second.uid != d.uid || it->second.ip != d.ip ||
        it->second.port != d.port)
      continue;
    if (it->second.generation == status->generation) continue;
    it->second.generation = status->generation;
    changed.push_back(d.key);
  }
  return changed;
}

void RendezvousMonitor::Loop() {
  for (;;) {
    for (const std::string& key : PollDue()) on_change_(key);
    MutexLock lock(mu_);
    auto wake = Clock::now() + options_.interval;
    for (const auto& [key, t] : targets_) wake = std::min(wake, t.next_poll);
    lock.WaitUntil(cv_, wake, [&]() REQUIRES(mu_) {
      if (stopping_) return true;
      for (const auto& [key, t] : targets_)
        if (t.next_poll <= Clock::now()) return true;
      return false;
    });
    if (stopping_) return;
  }
}

}  // namespace khorovod::op
