// ControlChannel: the transport the negotiation protocol (core/negotiator.h)
// runs over. Only the negotiator talks through it; the data plane is the
// Backend's. The implementation over a Gloo context is
// backend/gloo/gloo_control_channel.h; when every rank runs on one host, the
// shm backend hands the session backend/shm/shm_control_channel.h instead
// (Backend::TakeControlChannel).
//
// Errors: a failed exchange (a peer is gone) returns kUnavailable.
//
// Thread-safety: one caller at a time (the runtime's background thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "khorovod/status.h"

namespace khorovod {

// ControlChannel: the primitives the negotiation protocol needs. Always
// host-side; the coordinator is rank 0.
class ControlChannel {
 public:
  virtual ~ControlChannel() = default;
  // Every rank contributes the same number of words; *all receives every
  // rank's words, in rank order (size * mine.size() words).
  virtual Status AllgatherWords(const std::vector<uint64_t>& mine, std::vector<uint64_t>* all) = 0;
  // Root receives every rank's bytes in rank order; others get nothing.
  virtual Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) = 0;
  // Root's *data replaces *data everywhere.
  virtual Status BroadcastFromRoot(std::string* data) = 0;
};

}  // namespace khorovod
