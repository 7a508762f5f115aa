#include "backend/shm/host_leader_channel.h"

#include <gloo/context.h>

#include <cstring>

#include "backend/gloo/rank_subset_context.h"
#include "backend/shm/segment_join.h"
#include "bootstrap/gloo_mesh.h"
#include "bootstrap/interruptible_waits.h"

namespace khorovod::shm {
namespace {

// Host-mates wait at the second barrier while their leader is on the
// network, which takes longer than a spin is worth: they sleep at once.
constexpr std::chrono::microseconds kNoSpin{0};

}  // namespace

StatusOr<std::unique_ptr<ControlChannel>> HostLeaderChannel::Connect(
    const std::shared_ptr<gloo::Context>& world, const std::shared_ptr<gloo::Context>& host,
    const HostLayout& layout, std::chrono::milliseconds timeout, bool spin) {
  using Result = std::unique_ptr<ControlChannel>;
  std::vector<int> leaders;
  for (int h = 0; h < layout.hosts(); ++h) leaders.push_back(layout.HostRanks(h).front());
  const bool leader = host->rank == 0;
  // Every rank of the world takes part; a non-leader names a group of one.
  auto connected =
      gloo_ops::ConnectRankSubset(world, leader ? leaders : std::vector<int>{world->rank}, timeout);
  if (!connected.ok()) return connected.status();
  auto segment = JoinSegment(host, kSlotBytes);
  if (!segment.ok()) return segment.status();
  auto everyone = EveryHostJoined(world, *segment != nullptr);
  if (!everyone.ok()) return everyone.status();
  if (!*everyone) return Result();
  (*segment)->SetSpin(spin);
  return Result(new HostLeaderChannel(world, std::shared_ptr<ShmSegment>(std::move(*segment)),
                                      leader ? std::move(*connected) : nullptr, layout, timeout));
}

HostLeaderChannel::HostLeaderChannel(const std::shared_ptr<gloo::Context>& world,
                                     std::shared_ptr<ShmSegment> segment,
                                     std::shared_ptr<gloo::Context> leaders,
                                     const HostLayout& layout, std::chrono::milliseconds timeout)
    : world_gloo_(world),
      segment_(std::move(segment)),
      leaders_(std::move(leaders)),
      size_(world->size),
      local_rank_(layout.LocalRankOf(world->rank)),
      local_size_(layout.ranks_per_host()),
      timeout_(timeout) {
  for (int h = 0; h < layout.hosts(); ++h) world_rank_of_.push_back(layout.HostRanks(h));
  if (leaders_) leaders_gloo_ = std::make_unique<GlooControlChannel>(leaders_);
  if (auto* waits = dynamic_cast<InterruptibleWaits*>(world.get())) {
    std::weak_ptr<ShmSegment> weak = segment_;
    waits->OnInterrupt([weak] {
      if (auto segment = weak.lock()) segment->Abandon();
    });
  }
}

// The leaders' channel goes before the context it runs on; the segment's
// own destructor marks this rank departed once its last holder lets go.
HostLeaderChannel::~HostLeaderChannel() { leaders_gloo_.reset(); }

Status HostLeaderChannel::Fail(const Status& why) {
  broken_ = why;
  segment_->Depart();
  if (leaders_) AbandonMesh(*leaders_, why.ToString());
  return broken_;
}

Status HostLeaderChannel::AllgatherWords(const std::vector<uint64_t>& mine,
                                         std::vector<uint64_t>* all) {
  if (!broken_.ok()) return broken_;
  const size_t words = mine.size(), bytes = words * sizeof(uint64_t);
  if (bytes * static_cast<size_t>(size_) > segment_->slot_bytes())
    return world_gloo_.AllgatherWords(mine, all);
  const uint64_t generation = ++round_;
  const int set = static_cast<int>(generation & 1);
  std::memcpy(segment_->Slot(set, local_rank_), mine.data(), bytes);
  if (Status s = segment_->Barrier(local_rank_, 2 * generation - 1, timeout_); !s.ok())
    return Fail(s);
  if (leaders_) {
    if (Status s = ExchangeAcrossHosts(set, words); !s.ok()) return Fail(s);
  }
  if (Status s = segment_->Barrier(local_rank_, 2 * generation, timeout_,
                                   leaders_ ? std::chrono::microseconds::max() : kNoSpin);
      !s.ok())
    return Fail(s);
  all->resize(words * static_cast<size_t>(size_));
  std::memcpy(all->data(), segment_->Slot(set, 0), bytes * static_cast<size_t>(size_));
  return Status::Ok();
}

Status HostLeaderChannel::ExchangeAcrossHosts(int set, size_t words) {
  const size_t bytes = words * sizeof(uint64_t);
  host_block_.resize(words * static_cast<size_t>(local_size_));
  for (int l = 0; l < local_size_; ++l)
    std::memcpy(host_block_.data() + static_cast<size_t>(l) * words, segment_->Slot(set, l), bytes);
  KH_RETURN_IF_ERROR(leaders_gloo_->AllgatherWords(host_block_, &gathered_));
  // Block h of gathered_ is host h's ranks in local-rank order.
  auto* world_words = reinterpret_cast<uint64_t*>(segment_->Slot(set, 0));
  const uint64_t* from = gathered_.data();
  for (const std::vector<int>& ranks : world_rank_of_) {
    for (int rank : ranks) {
      std::memcpy(world_words + static_cast<size_t>(rank) * words, from, bytes);
      from += words;
    }
  }
  return Status::Ok();
}

Status HostLeaderChannel::GatherToRoot(const std::string& mine, std::vector<std::string>* all) {
  if (!broken_.ok()) return broken_;
  return world_gloo_.GatherToRoot(mine, all);
}

Status HostLeaderChannel::BroadcastFromRoot(std::string* data) {
  if (!broken_.ok()) return broken_;
  return world_gloo_.BroadcastFromRoot(data);
}

}  // namespace khorovod::shm
