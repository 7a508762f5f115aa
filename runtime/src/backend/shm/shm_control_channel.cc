#include "backend/shm/shm_control_channel.h"

#include <gloo/context.h>

#include <cstring>

#include "backend/gloo/interruptible_waits.h"
#include "backend/shm/segment_join.h"

namespace khorovod::shm {

StatusOr<std::unique_ptr<ControlChannel>> ShmControlChannel::Connect(
    const std::shared_ptr<gloo::Context>& world, std::chrono::milliseconds timeout, bool spin) {
  auto segment = JoinSegment(world, kSlotBytes);
  if (!segment.ok()) return segment.status();
  if (!*segment) return std::unique_ptr<ControlChannel>();
  (*segment)->SetSpin(spin);
  return std::unique_ptr<ControlChannel>(
      std::make_unique<ShmControlChannel>(world, std::shared_ptr<ShmSegment>(std::move(*segment)), timeout));
}

ShmControlChannel::ShmControlChannel(std::shared_ptr<gloo::Context> world, std::shared_ptr<ShmSegment> segment,
                                     std::chrono::milliseconds timeout)
    : gloo_(world), shared_(std::make_shared<Shared>()), rank_(world->rank), size_(world->size), timeout_(timeout) {
  shared_->segment = std::move(segment);
  if (auto* waits = dynamic_cast<InterruptibleWaits*>(world.get())) {
    std::weak_ptr<Shared> weak = shared_;
    waits->OnInterrupt([weak] {
      if (auto shared = weak.lock()) {
        shared->abandoned.store(true, std::memory_order_release);
        shared->segment->Depart();
      }
    });
  }
}

// The segment's own destructor marks this rank departed, once the last
// holder (this channel, or a running abandonment callback) lets go.
ShmControlChannel::~ShmControlChannel() = default;

Status ShmControlChannel::Fail(const Status& why) {
  broken_ = why;
  shared_->segment->Depart();
  return broken_;
}

Status ShmControlChannel::AllgatherWords(const std::vector<uint64_t>& mine, std::vector<uint64_t>* all) {
  const size_t bytes = mine.size() * sizeof(uint64_t);
  ShmSegment& segment = *shared_->segment;
  if (!broken_.ok()) return broken_;
  if (bytes > segment.slot_bytes()) return gloo_.AllgatherWords(mine, all);
  if (shared_->abandoned.load(std::memory_order_acquire))
    return Fail(Status::Unavailable("shared memory: this generation's connections were abandoned"));
  const uint64_t generation = ++round_;
  const int set = static_cast<int>(generation & 1);
  std::memcpy(segment.Slot(set, rank_), mine.data(), bytes);
  if (Status s = segment.Barrier(rank_, generation, timeout_); !s.ok()) return Fail(s);
  all->resize(mine.size() * static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) std::memcpy(all->data() + r * mine.size(), segment.Slot(set, r), bytes);
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
