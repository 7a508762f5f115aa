// The Gloo data-plane backend for host tensors, registered as "gloo".
// It runs every collective on the Gloo context the bootstrap connected.
#include <gloo/context.h>

#include "backend/gloo/gloo_direct.h"
#include "backend/gloo/gloo_ops.h"
#include "backend/gloo/gloo_ring.h"
#include "backend/registry.h"

namespace khorovod {
namespace {

class GlooBackend final : public Backend {
 public:
  explicit GlooBackend(std::shared_ptr<gloo::Context> ctx) : ctx_(std::move(ctx)) {}

  std::string_view name() const override { return "gloo"; }
  bool SupportsDevice(const Device& device) const override {
    return device.kind == DeviceKind::kCPU;
  }

  Status Allreduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op) override {
    const size_t esize = DataTypeSize(dtype);
    if (gloo_ops::PreferDirectAllreduce(ctx_->size, count * esize)) {
      const uint64_t slot =
          (uint64_t{0x7d} << 56) | (next_direct_slot_++ & ((uint64_t{1} << 56) - 1));
      return gloo_ops::DirectAllreduce(ctx_, in, out, count, esize, GetReduceFn(dtype, op), slot,
                                       &direct_scratch_);
    }
    return gloo_ops::Allreduce(ctx_, in, out, count, esize, GetReduceFn(dtype, op));
  }

  Status AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op) override {
    // Every rank makes the same calls in the same order, so the counter
    // yields the same slots everywhere; the prefix keeps them apart from
    // the slots of Gloo's own collectives.
    const uint64_t slot = (uint64_t{0x7e} << 56) | next_ring_slot_;
    next_ring_slot_ =
        (next_ring_slot_ + 2 * static_cast<uint64_t>(ctx_->size)) & ((uint64_t{1} << 56) - 1);
    return gloo_ops::RingAllreduceSpans(ctx_, spans, DataTypeSize(dtype), GetReduceFn(dtype, op),
                                        slot, &ring_scratch_);
  }

  Status Allgatherv(const void* in, void* out, const std::vector<size_t>& counts,
                    DataType dtype) override {
    std::vector<size_t> bytes(counts);
    for (auto& b : bytes) b *= DataTypeSize(dtype);
    return gloo_ops::AllgathervBytes(ctx_, in, out, bytes);
  }

  Status Broadcast(void* buffer, size_t count, DataType dtype, int root) override {
    return gloo_ops::BroadcastBytes(ctx_, buffer, count * DataTypeSize(dtype), root);
  }

  Status Alltoallv(const void* in, const std::vector<int64_t>& send_counts, void* out,
                   const std::vector<int64_t>& recv_counts, DataType dtype) override {
    const auto esize = static_cast<int64_t>(DataTypeSize(dtype));
    std::vector<int64_t> send(send_counts), recv(recv_counts);
    for (auto& s : send) s *= esize;
    for (auto& r : recv) r *= esize;
    return gloo_ops::AlltoallvBytes(ctx_, in, send, out, recv);
  }

  Status Barrier() override { return gloo_ops::Barrier(ctx_); }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  uint64_t next_ring_slot_ = 0;
  uint64_t next_direct_slot_ = 0;
  std::vector<std::byte> ring_scratch_;    // reused by every fused allreduce
  std::vector<std::byte> direct_scratch_;  // reused by every direct allreduce
};

StatusOr<std::unique_ptr<Backend>> MakeGlooBackend(const BackendInit& init) {
  if (!init.gloo_context)
    return Status::FailedPrecondition("gloo backend needs a connected context");
  return std::unique_ptr<Backend>(std::make_unique<GlooBackend>(init.gloo_context));
}

}  // namespace

KH_REGISTER_BACKEND(gloo, "gloo", MakeGlooBackend)

}  // namespace khorovod
