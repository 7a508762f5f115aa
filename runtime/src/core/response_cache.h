// ResponseCache: remembers negotiated single-tensor Responses so that a
// tensor seen before is agreed on with one bit instead of a full message.
//
// Every rank holds an identical cache: entries are inserted, touched and
// erased only at points that are ordered identically on all ranks (the
// response list broadcast by the coordinator and the globally agreed bit
// vectors), and slot assignment and eviction are deterministic (lowest free
// slot; least-recently-used with ties to the lowest slot). A slot number is
// therefore a name every rank understands.
//
// Each entry also keeps this rank's own Request, so a later submission hits
// only when its parameters are unchanged; a submission with a known name but
// different parameters is reported as kInvalid and the entry must be erased
// everywhere (via the invalid bits of the next round).
//
// Thread-safety: none; owned by the runtime's background thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/message.h"

namespace khorovod {

class ResponseCache {
 public:
  enum class Lookup { kMiss, kHit, kInvalid };
  struct Result {
    Lookup lookup = Lookup::kMiss;
    uint32_t slot = 0;
  };

  explicit ResponseCache(size_t capacity);

  size_t capacity() const { return slots_.size(); }
  bool enabled() const { return !slots_.empty(); }

  Result Find(const Request& request) const;
  // Inserts `response` (one tensor, kExecute) or replaces the entry with the
  // same name in place. `local` is this rank's request, or null when this
  // rank did not submit it (a joined rank). Returns the slot used.
  uint32_t Put(const Response& response, const Request* local);
  void Touch(uint32_t slot);
  void Erase(uint32_t slot);

  bool Occupied(uint32_t slot) const { return slot < slots_.size() && slots_[slot].occupied; }
  const Response& response(uint32_t slot) const { return slots_[slot].response; }
  const std::string& name(uint32_t slot) const { return slots_[slot].response.names.front(); }

  static bool Cacheable(const Response& response);

 private:
  struct Slot {
    bool occupied = false;
    Response response;
    std::optional<Request> local;
    uint64_t last_used = 0;
  };

  std::vector<Slot> slots_;
  std::unordered_map<std::string, uint32_t> by_name_;
  uint64_t clock_ = 0;
};

}  // namespace khorovod
