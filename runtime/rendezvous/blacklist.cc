#include "blacklist.h"

#include <algorithm>

namespace khorovod::rendezvous {

Blacklist::Blacklist(int threshold, Millis base, Millis max)
    : threshold_(std::max(threshold, 1)), base_(base), max_(std::max(base, max)) {}

Blacklist::Millis Blacklist::RecordFailure(const std::string& name, TimePoint now) {
  Entry& e = entries_[name];
  ++e.failures;
  if (e.failures < threshold_) return Millis(0);
  // base * 2^k, computed without overflow: stop doubling once past max.
  Millis cooldown = base_;
  for (int k = e.failures - threshold_; k > 0 && cooldown < max_; --k) cooldown *= 2;
  cooldown = std::min(cooldown, max_);
  e.until = std::max(e.until, now + cooldown);
  return cooldown;
}

Blacklist::Millis Blacklist::Remaining(const std::string& name, TimePoint now) const {
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.until <= now) return Millis(0);
  // Round up so that a positive remainder never reports as 0 ms.
  auto left = it->second.until - now;
  return std::chrono::ceil<Millis>(left);
}

int Blacklist::CountActive(TimePoint now) const {
  int n = 0;
  for (const auto& [name, e] : entries_) n += e.until > now ? 1 : 0;
  return n;
}

int Blacklist::failures(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? 0 : it->second.failures;
}

}  // namespace khorovod::rendezvous
