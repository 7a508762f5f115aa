// HostLeaderChannel: the negotiation primitives (backend/control_channel.h)
// for a world spread over several hosts with several ranks each: the ranks
// of a host meet in shared memory, and only one rank per host (its leader,
// local rank 0) talks across hosts.
//
// Why: every negotiation round is one AllgatherWords. Over Gloo alone each
// of n ranks sends its words to all n-1 others, so a round at 3 hosts x 2
// ranks costs 30 TCP messages, each a system call on both ends and a wake-up
// of a transport thread, on every rank, on cores the training shares. Here
// a round costs h(h-1) messages among the h leaders (6 at 3 x 2); the other
// ranks make no system call but a futex wait.
//
// AllgatherWords, round g (sets alternate as in ShmControlChannel):
//   1. every rank writes its words into its slot of set g % 2;     barrier
//   2. the leader copies its host's slots (local-rank order) into one
//      block, allgathers the blocks with the other leaders (a
//      GlooControlChannel over the leaders: bound buffers, one message per
//      peer), and writes every rank's words, in world-rank order, into its
//      own slot;                                                   barrier
//   3. every rank copies the world's words out of the leader's slot.
// A rank writes a set again two rounds later, after the next round's
// barriers, which the leader reaches only once it has read this round's
// slots and every other rank only once it has read this round's result.
// A round whose result does not fit a slot (the world's words), and the
// rare GatherToRoot/BroadcastFromRoot, go through the world's Gloo channel;
// every rank decides alike (all contribute the same number of words).
//
// Failures: a barrier that times out or finds a host-mate gone, and a Gloo
// error among the leaders, return kUnavailable; so does every later call.
// A failing rank departs the segment (its host-mates' waits end at once)
// and a failing leader abandons the leaders' connections (the other hosts'
// leaders see it at once, and depart theirs in turn). Abandoning the
// world's connections (bootstrap/gloo_mesh.h) abandons the segment and,
// through the world, the leaders' connections too.
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
#include "backend/shm/host_layout.h"
#include "backend/shm/shm_segment.h"

namespace gloo {
class Context;
}

namespace khorovod::shm {

class HostLeaderChannel final : public ControlChannel {
 public:
  // Bytes of one rank's slot; the leader's holds the whole world's words,
  // so a round takes shared memory while world size x words fits.
  static constexpr size_t kSlotBytes = 256 << 10;

  // Collective over `world` (every rank calls it at the same point). `host`
  // is this rank's host group (layout.HostGroup(world rank), connected);
  // `layout` must be Uniform(). Null (not an error) when some host could
  // not map its segment: then every rank keeps the world's Gloo channel.
  static StatusOr<std::unique_ptr<ControlChannel>> Connect(
      const std::shared_ptr<gloo::Context>& world, const std::shared_ptr<gloo::Context>& host,
      const HostLayout& layout, std::chrono::milliseconds timeout, bool spin);

  ~HostLeaderChannel() override;

  Status AllgatherWords(const std::vector<uint64_t>& mine, std::vector<uint64_t>* all) override;
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastFromRoot(std::string* data) override;

 private:
  HostLeaderChannel(const std::shared_ptr<gloo::Context>& world,
                    std::shared_ptr<ShmSegment> segment, std::shared_ptr<gloo::Context> leaders,
                    const HostLayout& layout, std::chrono::milliseconds timeout);
  // The leader's step 2: the host's block out to the other leaders, and the
  // world's words into its own slot of `set`.
  Status ExchangeAcrossHosts(int set, size_t words);
  Status Fail(const Status& why);

  GlooControlChannel world_gloo_;
  std::shared_ptr<ShmSegment> segment_;
  std::shared_ptr<gloo::Context> leaders_;            // null on a non-leader
  std::unique_ptr<GlooControlChannel> leaders_gloo_;  // over leaders_
  std::vector<std::vector<int>> world_rank_of_;       // [host][local rank]
  int size_, local_rank_, local_size_;
  std::chrono::milliseconds timeout_;
  uint64_t round_ = 0;
  std::vector<uint64_t> host_block_, gathered_;  // the leader's buffers, kept between rounds
  Status broken_;
};

}  // namespace khorovod::shm
