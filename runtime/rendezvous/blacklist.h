// Blacklist: exponential registration cooldown for workers that fail
// repeatedly.
//
// Every failure of a worker name (missed heartbeats, a reported failure, a
// restart while it was a member of a running generation, not asking for the
// next generation within the reform timeout) is recorded. From the
// `threshold`-th failure on, the name is refused for a cooldown of
//   base * 2^(failures - threshold), capped at `max`
// (defaults 1 s, 2 s, 4 s, ... 60 s). Failure counts are kept for the life
// of the server; the cooldown alone expires.
//
// Time is passed in explicitly (no clock is read), so the class is
// deterministic under test.
//
// Thread-safety: not thread-safe; the owner (Membership) is externally locked.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace khorovod::rendezvous {

class Blacklist {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Millis = std::chrono::milliseconds;

  // threshold >= 1; base and max > 0 (validated by MembershipPolicy).
  Blacklist(int threshold, Millis base, Millis max);

  // Records one failure of `name` at `now` and returns the cooldown it
  // starts (zero while the failure count is below the threshold).
  Millis RecordFailure(const std::string& name, TimePoint now);

  // Remaining cooldown of `name` at `now`; zero when it may register.
  Millis Remaining(const std::string& name, TimePoint now) const;

  // Number of names whose cooldown has not expired at `now`.
  int CountActive(TimePoint now) const;

  // Failures recorded for `name` so far.
  int failures(const std::string& name) const;

 private:
  struct Entry {
    int failures = 0;
    TimePoint until{};
  };
  int threshold_;
  Millis base_;
  Millis max_;
  std::map<std::string, Entry> entries_;
};

}  // namespace khorovod::rendezvous
