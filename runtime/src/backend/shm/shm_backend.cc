// The shared-memory data-plane backend, registered as "shm" (and chosen by
// "auto" when a host runs several ranks): when every rank of the world is
// on this host, allreduces move through one shared segment
// (backend/shm/shm_segment.h) instead of loopback TCP; every other
// collective, and allreduce for a world spread over several hosts, runs on
// the Gloo backend it wraps.
//
// Allreduce, chunk by chunk (a chunk is at most one slot):
//   1. every rank copies its chunk into its own slot;       barrier
//   2. rank r reduces part r of the chunk over all slots, in rank order,
//      into slot 0 (so every rank gets bit-identical results); barrier
//   3. every rank copies slot 0 out.
// Chunks alternate between the segment's two slot sets, so step 1 of the
// next chunk never overwrites what a slower rank is still copying out.
//
// Failures: a barrier that times out or finds a peer's process gone returns
// kUnavailable, like a Gloo transport failure, and the backend stays
// broken until the runtime re-forms (which destroys it, unmapping the
// segment).
#include <gloo/context.h>

#include <algorithm>
#include <cstring>

#include "backend/gloo/gloo_ops.h"
#include "backend/registry.h"
#include "backend/shm/shm_segment.h"
#include "common/reduce_kernels.h"

namespace khorovod {
namespace {

constexpr size_t kSlotBytes = 2 << 20;
constexpr size_t kNameBytes = 64;

class ShmBackend final : public Backend {
 public:
  ShmBackend(std::unique_ptr<Backend> gloo, std::unique_ptr<shm::ShmSegment> segment, int rank, int size,
             std::chrono::milliseconds timeout)
      : gloo_(std::move(gloo)), segment_(std::move(segment)), rank_(rank), size_(size), timeout_(timeout) {}

  std::string_view name() const override { return "shm"; }
  bool SupportsDevice(const Device& device) const override { return device.kind == DeviceKind::kCPU; }

  Status Allreduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op) override {
    if (!segment_) return gloo_->Allreduce(in, out, count, dtype, op);
    if (!broken_.ok()) return broken_;
    const size_t esize = DataTypeSize(dtype);
    const size_t chunk_elems = segment_->slot_bytes() / esize;
    const ReduceFn reduce = GetReduceFn(dtype, op);
    for (size_t at = 0; at < count; at += chunk_elems) {
      const size_t n = std::min(chunk_elems, count - at);
      broken_ = ReduceChunk(static_cast<const std::byte*>(in) + at * esize,
                            static_cast<std::byte*>(out) + at * esize, n, esize, reduce);
      if (!broken_.ok()) return broken_;
    }
    return Status::Ok();
  }

  Status AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op) override {
    if (!segment_) return gloo_->AllreduceSpans(spans, dtype, op);
    for (const Span& s : spans) KH_RETURN_IF_ERROR(Allreduce(s.data, s.data, s.count, dtype, op));
    return Status::Ok();
  }

  Status Allgatherv(const void* in, void* out, const std::vector<size_t>& counts, DataType dtype) override {
    return gloo_->Allgatherv(in, out, counts, dtype);
  }
  Status Broadcast(void* buffer, size_t count, DataType dtype, int root) override {
    return gloo_->Broadcast(buffer, count, dtype, root);
  }
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_counts, void* out,
                   const std::vector<int64_t>& recv_counts, DataType dtype) override {
    return gloo_->Alltoallv(in, send_counts, out, recv_counts, dtype);
  }
  Status Barrier() override { return gloo_->Barrier(); }

 private:
  Status ReduceChunk(const std::byte* in, std::byte* out, size_t count, size_t esize, ReduceFn reduce) {
    const int set = static_cast<int>(chunks_++ % 2);
    std::memcpy(segment_->Slot(set, rank_), in, count * esize);
    KH_RETURN_IF_ERROR(segment_->Barrier(rank_, ++generation_, timeout_));
    const size_t base = count / size_, extra = count % size_;
    const size_t first = rank_ * base + std::min<size_t>(rank_, extra);
    const size_t mine = base + (static_cast<size_t>(rank_) < extra ? 1 : 0);
    if (mine > 0) {
      std::byte* acc = segment_->Slot(set, 0) + first * esize;
      for (int r = 1; r < size_; ++r) reduce(acc, acc, segment_->Slot(set, r) + first * esize, mine);
    }
    KH_RETURN_IF_ERROR(segment_->Barrier(rank_, ++generation_, timeout_));
    std::memcpy(out, segment_->Slot(set, 0), count * esize);
    return Status::Ok();
  }

  std::unique_ptr<Backend> gloo_;
  std::unique_ptr<shm::ShmSegment> segment_;  // null: not every rank is on this host
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  uint64_t generation_ = 0;
  uint64_t chunks_ = 0;
  Status broken_;
};

// Rank 0 creates the segment and broadcasts its name; the others open it.
// Every rank learns whether all succeeded, so all use it or none does.
StatusOr<std::unique_ptr<shm::ShmSegment>> JoinSegment(const std::shared_ptr<gloo::Context>& ctx) {
  const int rank = ctx->rank, size = ctx->size;
  std::unique_ptr<shm::ShmSegment> segment;
  Status local;
  char name[kNameBytes] = {};
  if (rank == 0) {
    auto created = shm::ShmSegment::Create(size, kSlotBytes);
    if (created.ok()) {
      segment = std::move(*created);
      std::snprintf(name, sizeof name, "%s", segment->name().c_str());
    } else {
      local = created.status();
    }
  }
  KH_RETURN_IF_ERROR(gloo_ops::BroadcastBytes(ctx, name, sizeof name, 0));
  if (rank != 0 && name[0] != '\0') {
    auto opened = shm::ShmSegment::Open(name, size, kSlotBytes);
    if (opened.ok()) segment = std::move(*opened);
    else local = opened.status();
  }
  if (rank != 0 && name[0] == '\0') local = Status::Unavailable("rank 0 could not create the segment");
  int32_t ok = local.ok() ? 1 : 0;
  KH_RETURN_IF_ERROR(gloo_ops::Allreduce(ctx, &ok, &ok, 1, sizeof ok, GetReduceFn(DataType::kInt32, ReduceOp::kMin)));
  if (segment) segment->Attach(rank);
  // Every rank has mapped it (or given up): the name can go.
  KH_RETURN_IF_ERROR(gloo_ops::Barrier(ctx));
  if (segment) segment->Unlink();
  if (!ok) {
    if (!local.ok()) std::fprintf(stderr, "khorovod: shm backend falls back to gloo: %s\n", local.ToString().c_str());
    return std::unique_ptr<shm::ShmSegment>();
  }
  return segment;
}

StatusOr<std::unique_ptr<Backend>> MakeShmBackend(const BackendInit& init) {
  if (!init.gloo_context || !init.config) return Status::FailedPrecondition("shm backend needs a connected context");
  auto gloo = BackendRegistry::Create("gloo", init);
  if (!gloo.ok()) return gloo.status();
  const Config& c = *init.config;
  std::unique_ptr<shm::ShmSegment> segment;
  // Only a world that lives on this one host shares a segment (the choice
  // depends on the placement, which every rank agrees on).
  if (c.size > 1 && c.local_size == c.size) {
    auto joined = JoinSegment(init.gloo_context);
    if (!joined.ok()) return joined.status();
    segment = std::move(*joined);
  }
  return std::unique_ptr<Backend>(std::make_unique<ShmBackend>(std::move(*gloo), std::move(segment), c.rank,
                                                               c.size, c.transport_timeout));
}

}  // namespace

KH_REGISTER_BACKEND(shm, "shm", MakeShmBackend)

}  // namespace khorovod
