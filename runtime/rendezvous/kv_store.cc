#include "kv_store.h"

#include <charconv>

namespace khorovod::rendezvous {

KvStore::KvStore(Limits limits) : limits_(limits) {}

const std::string* KvStore::Lookup(int64_t generation, const std::string& key) const {
  auto space = spaces_.find(generation);
  if (space == spaces_.end()) return nullptr;
  auto it = space->second.find(key);
  return it == space->second.end() ? nullptr : &it->second;
}

KvStore::Result KvStore::Store(int64_t generation, const std::string& key, std::string value) {
  Space& space = spaces_[generation];
  auto it = space.find(key);
  size_t old_bytes = it == space.end() ? 0 : key.size() + it->second.size();
  size_t new_bytes = key.size() + value.size();
  if (total_bytes_ - old_bytes + new_bytes > limits_.max_total_bytes) {
    if (space.empty()) spaces_.erase(generation);
    return Result::kFull;
  }
  total_bytes_ = total_bytes_ - old_bytes + new_bytes;
  if (it == space.end())
    space.emplace(key, std::move(value));
  else
    it->second = std::move(value);
  cv_.notify_all();
  return Result::kOk;
}

KvStore::Result KvStore::Set(int64_t generation, const std::string& key, std::string value) {
  MutexLock lock(mu_);
  if (shutdown_) return Result::kShutdown;
  return Store(generation, key, std::move(value));
}

KvStore::Result KvStore::Get(int64_t generation, const std::string& key, Deadline deadline,
                             std::string* value) {
  MutexLock lock(mu_);
  for (bool timed_out = false;;
       timed_out = lock.WaitUntil(cv_, deadline) == std::cv_status::timeout) {
    if (shutdown_) return Result::kShutdown;
    if (const std::string* v = Lookup(generation, key)) {
      *value = *v;
      return Result::kOk;
    }
    if (Closed(generation)) return Result::kClosed;
    if (timed_out) return Result::kNotFound;
  }
}

KvStore::Result KvStore::Add(int64_t generation, const std::string& key, int64_t delta,
                             int64_t* result) {
  MutexLock lock(mu_);
  if (shutdown_) return Result::kShutdown;
  int64_t current = 0;
  if (const std::string* v = Lookup(generation, key)) {
    const char* begin = v->data();
    const char* end = begin + v->size();
    auto [ptr, ec] = std::from_chars(begin, end, current);
    if (v->empty() || ec != std::errc() || ptr != end) return Result::kNotInteger;
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) return Result::kNotInteger;
  Result r = Store(generation, key, std::to_string(sum));
  if (r == Result::kOk) *result = sum;
  return r;
}

KvStore::Result KvStore::Wait(int64_t generation, const std::vector<std::string>& keys,
                              Deadline deadline, std::vector<std::string>* missing) {
  MutexLock lock(mu_);
  for (bool timed_out = false;;
       timed_out = lock.WaitUntil(cv_, deadline) == std::cv_status::timeout) {
    if (shutdown_) return Result::kShutdown;
    missing->clear();
    for (const auto& k : keys) {
      if (!Lookup(generation, k)) missing->push_back(k);
    }
    if (missing->empty()) return Result::kOk;
    if (Closed(generation)) return Result::kClosed;
    if (timed_out) return Result::kNotFound;
  }
}

void KvStore::DropGenerationsBelow(int64_t keep_from) {
  MutexLock lock(mu_);
  for (auto it = spaces_.begin(); it != spaces_.end();) {
    if (it->first != 0 && it->first < keep_from) {
      for (const auto& [k, v] : it->second) total_bytes_ -= k.size() + v.size();
      it = spaces_.erase(it);
    } else {
      ++it;
    }
  }
}

void KvStore::CloseGenerationsUpTo(int64_t last) {
  MutexLock lock(mu_);
  if (last <= closed_up_to_) return;
  closed_up_to_ = last;
  cv_.notify_all();
}

void KvStore::Shutdown() {
  MutexLock lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

size_t KvStore::total_bytes() const {
  MutexLock lock(mu_);
  return total_bytes_;
}

size_t KvStore::key_count() const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& [g, space] : spaces_) n += space.size();
  return n;
}

}  // namespace khorovod::rendezvous
