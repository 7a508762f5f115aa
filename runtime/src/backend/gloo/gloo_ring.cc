#include "backend/gloo/gloo_ring.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>

#include "bootstrap/interruptible_waits.h"

namespace khorovod::gloo_ops {
namespace {

struct Piece {
  size_t span;    // index into spans
  size_t offset;  // element offset within the span
  size_t count;   // elements
};

class RingPlan {
 public:
  RingPlan(const std::vector<Backend::Span>& spans, size_t element_size, int size)
      : spans_(spans), esize_(element_size), size_(size) {
    for (const auto& s : spans) {
      starts_.push_back(total_);
      total_ += s.count;
    }
  }

  size_t total() const { return total_; }
  size_t chunk_begin(int c) const {
    const size_t base = total_ / size_, extra = total_ % size_;
    return c * base + std::min<size_t>(c, extra);
  }
  size_t chunk_end(int c) const { return chunk_begin(c + 1); }
  size_t max_chunk() const { return total_ / size_ + (total_ % size_ ? 1 : 0); }

  // Pieces covering elements [begin, end) of the concatenation.
  std::vector<Piece> Pieces(size_t begin, size_t end) const {
    std::vector<Piece> out;
    const size_t max_elems = std::max<size_t>(kPieceBytes / esize_, 1);
    size_t s = std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin() - 1;
    for (size_t pos = begin; pos < end;) {
      while (pos >= starts_[s] + spans_[s].count) ++s;
      const size_t in_span = pos - starts_[s];
      const size_t n = std::min({end - pos, spans_[s].count - in_span, max_elems});
      out.push_back({s, in_span, n});
      pos += n;
    }
    return out;
  }

 private:
  const std::vector<Backend::Span>& spans_;
  size_t esize_;
  int size_;
  std::vector<size_t> starts_;
  size_t total_ = 0;
};

}  // namespace

Status RingAllreduceSpans(const std::shared_ptr<gloo::Context>& ctx,
                          const std::vector<Backend::Span>& spans, size_t element_size,
                          ReduceFn reduce, uint64_t slot, std::vector<std::byte>* scratch_storage) {
  const int size = ctx->size, rank = ctx->rank;
  RingPlan plan(spans, element_size, size);
  if (size == 1 || plan.total() == 0) return Status::Ok();
  try {
    const auto timeout = ctx->getTimeout();
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> buffers;
    for (const auto& s : spans) {
      buffers.push_back(
          ctx->createUnboundBuffer(s.data, std::max<size_t>(s.count, 1) * element_size));
    }
    if (scratch_storage->size() < plan.max_chunk() * element_size) {
      scratch_storage->resize(plan.max_chunk() * element_size);
    }
    std::vector<std::byte>& scratch = *scratch_storage;
    auto scratch_buf = ctx->createUnboundBuffer(scratch.data(), scratch.size());
    WaitScope waits(*ctx, {scratch_buf.get()});
    for (auto& b : buffers) waits.Add(b.get());
    waits.Check();

    auto wait_sends = [&](const std::vector<Piece>& sent) {
      for (const Piece& p : sent) waits.WaitSend(*buffers[p.span], timeout);
    };

    // Reduce-scatter: after step s, chunk (rank - s - 1) holds s + 2 ranks' sum.
    for (int step = 0; step < size - 1; ++step) {
      const int send_chunk = (rank - step + size) % size;
      const int recv_chunk = (rank - step - 1 + 2 * size) % size;
      const auto sends = plan.Pieces(plan.chunk_begin(send_chunk), plan.chunk_end(send_chunk));
      const auto recvs = plan.Pieces(plan.chunk_begin(recv_chunk), plan.chunk_end(recv_chunk));
      const uint64_t step_slot = slot + static_cast<uint64_t>(step);
      size_t at = 0;
      for (const Piece& p : recvs) {
        scratch_buf->recv(left, step_slot, at * element_size, p.count * element_size);
        at += p.count;
      }
      for (const Piece& p : sends) {
        buffers[p.span]->send(right, step_slot, p.offset * element_size, p.count * element_size);
      }
      at = 0;
      for (const Piece& p : recvs) {
        waits.WaitRecv(*scratch_buf, timeout);
        auto* dst = static_cast<std::byte*>(spans[p.span].data) + p.offset * element_size;
        reduce(dst, dst, scratch.data() + at * element_size, p.count);
        at += p.count;
      }
      wait_sends(sends);
    }
    // Allgather: circulate the fully reduced chunks straight into place.
    for (int step = 0; step < size - 1; ++step) {
      const int send_chunk = (rank + 1 - step + size) % size;
      const int recv_chunk = (rank - step + size) % size;
      const auto sends = plan.Pieces(plan.chunk_begin(send_chunk), plan.chunk_end(send_chunk));
      const auto recvs = plan.Pieces(plan.chunk_begin(recv_chunk), plan.chunk_end(recv_chunk));
      const uint64_t step_slot = slot + static_cast<uint64_t>(size + step);
      for (const Piece& p : recvs) {
        buffers[p.span]->recv(left, step_slot, p.offset * element_size, p.count * element_size);
      }
      for (const Piece& p : sends) {
        buffers[p.span]->send(right, step_slot, p.offset * element_size, p.count * element_size);
      }
      for (const Piece& p : recvs) waits.WaitRecv(*buffers[p.span], timeout);
      wait_sends(sends);
    }
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("gloo ring allreduce failed: ") + e.what());
  }
}

}  // namespace khorovod::gloo_ops
