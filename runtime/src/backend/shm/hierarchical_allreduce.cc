#include "backend/shm/hierarchical_allreduce.h"

#include <gloo/context.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backend/gloo/gloo_ops.h"
#include "backend/gloo/rank_subset_context.h"
#include "backend/registry.h"
#include "backend/shm/host_layout.h"
#include "backend/shm/segment_join.h"
#include "bootstrap/gloo_mesh.h"
#include "common/reduce_kernels.h"
#include "common/waiter_signal.h"

namespace khorovod::shm {
namespace {

// Every rank's placement, in rank order (one allgather over the world).
StatusOr<std::vector<Placement>> GatherPlacements(const Config& config,
                                                  const std::shared_ptr<gloo::Context>& world) {
  const auto size = static_cast<size_t>(world->size);
  const Placement mine = config;
  std::vector<Placement> all(size);
  KH_RETURN_IF_ERROR(
      gloo_ops::AllgathervBytes(world, &mine, all.data(), std::vector<size_t>(size, sizeof mine)));
  return all;
}

// How long a rank yields at the barrier after a cross-host step before it
// sleeps: about the skew between host-mates' cross-host steps when the
// network is fast, well below a cross-host step when it is not.
constexpr std::chrono::microseconds kPatientAfter{50};

}  // namespace

StatusOr<std::unique_ptr<HierarchicalAllreduce>> HierarchicalAllreduce::Connect(
    const Config& config, const std::shared_ptr<gloo::Context>& world) {
  using Result = std::unique_ptr<HierarchicalAllreduce>;
  if (world->size < 2) return Result();
  auto placements = GatherPlacements(config, world);
  if (!placements.ok()) return placements.status();
  auto layout = HostLayout::FromPlacements(*placements);
  if (!layout.ok()) {
    // Every rank sees the same placements, so every rank falls back.
    if (world->rank == 0)
      std::fprintf(stderr, "khorovod: shm backend uses gloo: %s\n",
                   layout.status().ToString().c_str());
    return Result();
  }
  const bool one_host = static_cast<int>(layout->HostGroup(0).size()) == world->size;
  if (!one_host && !layout->Uniform()) return Result();
  const std::chrono::milliseconds timeout = config.transport_timeout;
  // One host: the world is the host group, and its ranks are the slots.
  std::shared_ptr<gloo::Context> host = world, cross;
  if (!one_host) {
    auto h = gloo_ops::ConnectRankSubset(world, layout->HostGroup(world->rank), timeout);
    if (!h.ok()) return h.status();
    auto c = gloo_ops::ConnectRankSubset(world, layout->CrossGroup(world->rank), timeout);
    if (!c.ok()) return c.status();
    host = std::move(*h);
    cross = std::move(*c);
  }
  auto segment = JoinSegment(host, kSlotBytes);
  if (!segment.ok()) return segment.status();
  if (*segment) (*segment)->SetSpin(SpinPolicy::ForConfig(config).enabled());
  if (one_host) {
    if (!*segment) return Result();  // JoinSegment agreed over the whole world
    return std::make_unique<HierarchicalAllreduce>(std::move(*segment), std::move(*layout),
                                                   host->rank, host->size, host, nullptr, nullptr,
                                                   timeout);
  }
  auto everyone = EveryHostJoined(world, *segment != nullptr);
  if (!everyone.ok()) return everyone.status();
  if (!*everyone) return Result();
  auto cross_backend = BackendRegistry::Create("gloo", BackendInit{&config, cross});
  if (!cross_backend.ok()) return cross_backend.status();
  return std::make_unique<HierarchicalAllreduce>(std::move(*segment), std::move(*layout),
                                                 host->rank, host->size, host, cross,
                                                 std::move(*cross_backend), timeout);
}

HierarchicalAllreduce::HierarchicalAllreduce(std::unique_ptr<ShmSegment> segment, HostLayout layout,
                                             int local_rank, int local_size,
                                             std::shared_ptr<gloo::Context> host,
                                             std::shared_ptr<gloo::Context> cross,
                                             std::unique_ptr<Backend> cross_backend,
                                             std::chrono::milliseconds timeout)
    : segment_(std::move(segment)),
      layout_(std::move(layout)),
      local_rank_(local_rank),
      local_size_(local_size),
      host_(std::move(host)),
      cross_(std::move(cross)),
      cross_backend_(std::move(cross_backend)),
      timeout_(timeout) {}

// The backend goes before the context it runs on; the segment last of all
// (its destructor marks this rank departed).
HierarchicalAllreduce::~HierarchicalAllreduce() { cross_backend_.reset(); }

int HierarchicalAllreduce::hosts() const { return cross_ ? cross_->size : 1; }

bool HierarchicalAllreduce::TakesWithoutTrial(int hosts, size_t bytes) {
  return hosts <= 1 || bytes <= kBandwidthBoundBytes;
}

Status HierarchicalAllreduce::Allreduce(const void* in, void* out, size_t count, DataType dtype,
                                        ReduceOp op) {
  return Run({{static_cast<const std::byte*>(in), static_cast<std::byte*>(out), count}}, dtype, op);
}

Status HierarchicalAllreduce::AllreduceSpans(const std::vector<Backend::Span>& spans,
                                             DataType dtype, ReduceOp op) {
  std::vector<Piece> pieces;
  pieces.reserve(spans.size());
  for (const Backend::Span& s : spans) {
    auto* data = static_cast<std::byte*>(s.data);
    pieces.push_back({data, data, s.count});
  }
  return Run(pieces, dtype, op);
}

Status HierarchicalAllreduce::Run(const std::vector<Piece>& pieces, DataType dtype, ReduceOp op) {
  if (!broken_.ok()) return broken_;
  if (Status s = RunChunks(pieces, dtype, op); !s.ok()) {
    Fail(s);
    return broken_;
  }
  return Status::Ok();
}

Status HierarchicalAllreduce::RunChunks(const std::vector<Piece>& pieces, DataType dtype,
                                        ReduceOp op) {
  const size_t esize = DataTypeSize(dtype);
  const size_t chunk_elems = segment_->slot_bytes() / esize;
  std::vector<Piece> parts;
  size_t filled = 0;
  for (const Piece& piece : pieces) {
    for (size_t at = 0; at < piece.count;) {
      const size_t n = std::min(chunk_elems - filled, piece.count - at);
      parts.push_back({piece.in + at * esize, piece.out + at * esize, n});
      filled += n;
      at += n;
      if (filled < chunk_elems) continue;
      KH_RETURN_IF_ERROR(Chunk(parts, dtype, op));
      parts.clear();
      filled = 0;
    }
  }
  return parts.empty() ? Status::Ok() : Chunk(parts, dtype, op);
}

std::pair<size_t, size_t> HierarchicalAllreduce::PartOf(size_t count, size_t esize) const {
  // A small chunk's time is hops and system calls, not bytes: one cross
  // allreduce among the leaders sends 1/local_size of the messages that
  // local_size concurrent ones would, on cores the ranks share.
  if (cross_backend_ && count * esize <= kLeaderOnlyBytes) return {0, local_rank_ == 0 ? count : 0};
  const size_t ranks = static_cast<size_t>(local_size_), me = static_cast<size_t>(local_rank_);
  const size_t base = count / ranks, extra = count % ranks;
  return {me * base + std::min(me, extra), base + (me < extra ? 1 : 0)};
}

Status HierarchicalAllreduce::Chunk(const std::vector<Piece>& parts, DataType dtype, ReduceOp op) {
  const size_t esize = DataTypeSize(dtype);
  const int set = static_cast<int>(chunks_++ % 2);
  std::byte* own = segment_->Slot(set, local_rank_);
  size_t count = 0;
  for (const Piece& p : parts) {
    std::memcpy(own + count * esize, p.in, p.count * esize);
    count += p.count;
  }
  KH_RETURN_IF_ERROR(segment_->Barrier(local_rank_, ++generation_, timeout_));
  const auto [first, mine] = PartOf(count, esize);
  // Every member of a cross group has the same local rank, hence the same
  // part length: all of them skip an empty part alike.
  if (mine > 0) {
    std::byte* acc = segment_->Slot(set, 0) + first * esize;
    const ReduceFn reduce = GetReduceFn(dtype, op);
    for (int r = 1; r < local_size_; ++r)
      reduce(acc, acc, segment_->Slot(set, r) + first * esize, mine);
    if (cross_backend_) KH_RETURN_IF_ERROR(cross_backend_->Allreduce(acc, acc, mine, dtype, op));
  }
  // After a cross-host step, host-mates may still be waiting on the network
  // for a while: sleep rather than yield in a loop (see ShmSegment::Barrier).
  KH_RETURN_IF_ERROR(
      segment_->Barrier(local_rank_, ++generation_, timeout_,
                        cross_backend_ ? kPatientAfter : std::chrono::microseconds::max()));
  const std::byte* reduced = segment_->Slot(set, 0);
  for (const Piece& p : parts) {
    std::memcpy(p.out, reduced, p.count * esize);
    reduced += p.count * esize;
  }
  return Status::Ok();
}

void HierarchicalAllreduce::Fail(const Status& why) {
  broken_ = why;
  segment_->Depart();
  if (cross_) AbandonMesh(*cross_, why.ToString());
}

}  // namespace khorovod::shm
