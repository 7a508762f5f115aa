#include "launcher/host_blacklist.h"

#include <algorithm>
#include <cmath>

namespace khorovod::launcher {

HostBlacklist::HostBlacklist(int min_s, int max_s, std::function<double()> jitter)
    : min_s_(min_s), max_s_(max_s), jitter_(std::move(jitter)) {}

void HostBlacklist::Fail(const std::string& host, Clock::time_point now) {
  State& s = hosts_[host];
  if (min_s_ <= 0) {
    s.count = std::max(s.count, 1);
    return;
  }
  if (s.count > 0 && now < s.end) return;  // still cooling down
  ++s.count;
  const double delay = min_s_ * std::ldexp(1.0, std::min(s.count, 30)) + jitter_() * min_s_;
  const double seconds =
      std::clamp(delay, static_cast<double>(min_s_), static_cast<double>(max_s_));
  s.end = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

bool HostBlacklist::IsBlacklisted(const std::string& host, Clock::time_point now) const {
  const auto it = hosts_.find(host);
  if (it == hosts_.end() || it->second.count == 0) return false;
  return min_s_ <= 0 || now < it->second.end;
}

std::optional<HostBlacklist::Clock::time_point> HostBlacklist::CooldownEnd(
    const std::string& host) const {
  const auto it = hosts_.find(host);
  if (min_s_ <= 0 || it == hosts_.end() || it->second.count == 0) return std::nullopt;
  return it->second.end;
}

}  // namespace khorovod::launcher
