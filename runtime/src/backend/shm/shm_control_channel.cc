#include "backend/shm/shm_control_channel.h"

#include <gloo/context.h>

#include <cstring>

#include "backend/shm/segment_join.h"
#include "bootstrap/interruptible_waits.h"

namespace khorovod::shm {

StatusOr<std::unique_ptr<ControlChannel>> ShmControlChannel::Connect(
    const std::shared_ptr<gloo::Context>& world, std::chrono::milliseconds timeout, bool spin) {
  auto segment = JoinSegment(world, kSlotBytes);
  if (!segment.ok()) return segment.status();
  if (!*segment) return std::unique_ptr<ControlChannel>();
  (*segment)->SetSpin(spin);
  return std::unique_ptr<ControlChannel>(std::make_unique<ShmControlChannel>(
      world, std::shared_ptr<ShmSegment>(std::move(*segment)), timeout));
}

ShmControlChannel::ShmControlChannel(std::shared_ptr<gloo::Context> world,
                                     std::shared_ptr<ShmSegment> segment,
                                     std::chrono::milliseconds timeout)
    : gloo_(world),
      segment_(std::move(segment)),
      rank_(world->rank),
      size_(world->size),
      timeout_(timeout) {
  if (auto* waits = dynamic_cast<InterruptibleWaits*>(world.get())) {
    std::weak_ptr<ShmSegment> weak = segment_;
    waits->OnInterrupt([weak] {
      if (auto segment = weak.lock()) segment->Abandon();
    });
  }
}

// The segment's own destructor marks this rank departed, once the last
// holder (this channel, or a running abandonment callback) lets go.
ShmControlChannel::~ShmControlChannel() = default;

Status ShmControlChannel::Fail(const Status& why) {
  broken_ = why;
  segment_->Depart();
  return broken_;
}

Status ShmControlChannel::AllgatherWords(const std::vector<uint64_t>& mine,
                                         std::vector<uint64_t>* all) {
  if (!broken_.ok()) return broken_;
  const size_t bytes = mine.size() * sizeof(uint64_t);
  if (bytes > segment_->slot_bytes()) return gloo_.AllgatherWords(mine, all);
  const uint64_t generation = ++round_;
  const int set = static_cast<int>(generation & 1);
  std::memcpy(segment_->Slot(set, rank_), mine.data(), bytes);
  if (Status s = segment_->Barrier(rank_, generation, timeout_); !s.ok()) return Fail(s);
  all->resize(mine.size() * static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r)
    std::memcpy(all->data() + r * mine.size(), segment_->Slot(set, r), bytes);
  return Status::Ok();
}

Status ShmControlChannel::GatherToRoot(const std::string& mine, std::vector<std::string>* all) {
  if (!broken_.ok()) return broken_;
  return gloo_.GatherToRoot(mine, all);
}

Status ShmControlChannel::BroadcastFromRoot(std::string* data) {
  if (!broken_.ok()) return broken_;
  return gloo_.BroadcastFromRoot(data);
}

}  // namespace khorovod::shm
