// ShmControlChannel: the negotiation primitives (core/control_channel.h)
// through shared memory, for a world whose ranks all run on this host.
//
// Why: AllgatherWords is the whole cost of a steady-state negotiation round
// (the ready bits and the eager payload, core/negotiator.h), and a small
// allreduce costs little more than that round. Over loopback TCP one round
// is a Gloo send and receive per peer plus the wake-ups of the transport's
// event thread, on the order of 100 us on a virtual machine; here each rank
// writes its words into its slot of a small segment, meets the others at one
// barrier and reads every slot.
//
// One barrier per round is enough: rounds alternate between the segment's
// two slot sets, and a rank writes a set again two rounds later, only after
// the next round's barrier, which every rank reaches only once it has read
// this round's slots.
//
// Messages larger than a slot, and the rare GatherToRoot/BroadcastFromRoot
// (uncached requests, the coordinator's answers), go through the Gloo
// channel it wraps. Every rank makes the same choice (every rank contributes
// the same number of words), and both channels are collective in the same
// order, so the two never cross.
//
// Failures: a barrier that times out, or finds a peer's process gone or
// departed, returns kUnavailable (as a Gloo failure does), and so does every
// later call. Abandoning the world's Gloo connections (a doomed elastic
// generation, bootstrap/gloo_mesh.h) abandons this channel too: the rank
// departs the segment, so its peers' waits end at once, and its own wait
// ends as well, even on a peer that lives on without arriving (stopped, so
// only the rendezvous's heartbeat timeout can tell); every later exchange
// fails. A failing rank departs as well.
//
// Thread-safety: one caller at a time (the runtime's background thread);
// the abandonment may come from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/control_channel.h"
#include "backend/gloo/gloo_control_channel.h"
#include "backend/shm/shm_segment.h"

namespace gloo {
class Context;
}

namespace khorovod::shm {

class ShmControlChannel final : public ControlChannel {
 public:
  // Bytes of one rank's slot: the largest message that takes shared memory
  // (a round's message is about 1.3 KiB with the default cache capacity).
  static constexpr size_t kSlotBytes = 64 << 10;

  // Collective over `world`, whose ranks must all run on this host. Null
  // (not an error) when some rank could not map the segment: then every
  // rank keeps the Gloo channel.
  static StatusOr<std::unique_ptr<ControlChannel>> Connect(
      const std::shared_ptr<gloo::Context>& world, std::chrono::milliseconds timeout, bool spin);

  ShmControlChannel(std::shared_ptr<gloo::Context> world, std::shared_ptr<ShmSegment> segment,
                    std::chrono::milliseconds timeout);
  ~ShmControlChannel() override;

  Status AllgatherWords(const std::vector<uint64_t>& mine, std::vector<uint64_t>* all) override;
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastFromRoot(std::string* data) override;

 private:
  Status Fail(const Status& why);

  GlooControlChannel gloo_;
  // Shared with the abandonment callback, which may outlive the channel.
  std::shared_ptr<ShmSegment> segment_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  uint64_t round_ = 0;  // the barrier generation of the last round
  Status broken_;
};

}  // namespace khorovod::shm
