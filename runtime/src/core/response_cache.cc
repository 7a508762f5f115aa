#include "core/response_cache.h"

#include "common/enforce.h"

namespace khorovod {

ResponseCache::ResponseCache(size_t capacity) : slots_(capacity) {}

bool ResponseCache::Cacheable(const Response& r) {
  return r.kind == Response::Kind::kExecute && r.names.size() == 1 && r.op != OpType::kJoin &&
         r.op != OpType::kBarrier && r.op != OpType::kProcessSet && r.process_set == 0;
}

ResponseCache::Result ResponseCache::Find(const Request& request) const {
  auto it = by_name_.find(request.name);
  if (it == by_name_.end()) return {Lookup::kMiss, 0};
  const Slot& s = slots_[it->second];
  if (s.local && s.local->SameParameters(request)) return {Lookup::kHit, it->second};
  return {Lookup::kInvalid, it->second};
}

uint32_t ResponseCache::Put(const Response& response, const Request* local) {
  KH_ENFORCE(enabled() && Cacheable(response), "Put of an uncacheable response");
  const std::string& name = response.names.front();
  uint32_t slot;
  auto it = by_name_.find(name);
  if (it != by_name_.end()) {
    slot = it->second;
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    uint64_t oldest = UINT64_MAX;
    uint32_t lru = 0;
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i].occupied) {
        slot = i;
        break;
      }
      if (slots_[i].last_used < oldest) {
        oldest = slots_[i].last_used;
        lru = i;
      }
    }
    if (slot == slots_.size()) {
      Erase(lru);
      slot = lru;
    }
    by_name_[name] = slot;
  }
  Slot& s = slots_[slot];
  s.occupied = true;
  s.response = response;
  s.local = local ? std::optional<Request>(*local) : std::nullopt;
  s.last_used = ++clock_;
  return slot;
}

void ResponseCache::Touch(uint32_t slot) {
  KH_ENFORCE(Occupied(slot), "Touch of empty slot " << slot);
  slots_[slot].last_used = ++clock_;
}

void ResponseCache::Erase(uint32_t slot) {
  if (!Occupied(slot)) return;
  by_name_.erase(slots_[slot].response.names.front());
  slots_[slot] = Slot{};
}

}  // namespace khorovod
