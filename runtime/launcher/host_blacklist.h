// Host blacklist: Horovod's elastic host blacklist, for khorovodrun.
//
// When a worker fails, Horovod's elastic driver blacklists its host: no
// worker runs there any more. Without --blacklist-cooldown-range that is
// for good. With a range MIN..MAX (seconds) the host comes back when a
// cooldown ends; the n-th blacklisting (n counted per host, from 1) lasts
//     clamp(MIN * 2^n + U(0,1) * MIN, MIN, MAX)
// (horovod/runner/elastic/discovery.py, HostState). A failure reported
// while the host is still cooling down does not extend it.
//
// Contract: Fail(host, now) blacklists `host`; IsBlacklisted(host, now) is
// true from then on without a range, and until the cooldown's end with one;
// CooldownEnd returns that end (nullopt without a range or never failed).
// `jitter` supplies U(0,1) (tests pass a fixed one).
//
// Thread-safety: none; the launcher's main thread owns it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace khorovod::launcher {

class HostBlacklist {
 public:
  using Clock = std::chrono::steady_clock;

  // min_s == max_s == 0: no cooldown (blacklisted for good).
  HostBlacklist(int min_s, int max_s, std::function<double()> jitter);

  void Fail(const std::string& host, Clock::time_point now);
  bool IsBlacklisted(const std::string& host, Clock::time_point now) const;
  std::optional<Clock::time_point> CooldownEnd(const std::string& host) const;

 private:
  struct State {
    int count = 0;
    Clock::time_point end{};
  };
  int min_s_;
  int max_s_;
  std::function<double()> jitter_;
  std::map<std::string, State> hosts_;
};

}  // namespace khorovod::launcher
