#include "backend/gloo/gloo_ring.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <chrono>

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

// The ring's state while it runs: the spans' unbound buffers, the two
// scratch halves, and how many sends each buffer owes.
class PipelinedRing {
 public:
  PipelinedRing(gloo::Context& ctx, const std::vector<Backend::Span>& spans, size_t esize,
                ReduceFn reduce, uint64_t slot, std::vector<std::byte>& scratch)
      : plan_(spans, esize, ctx.size),
        spans_(spans),
        esize_(esize),
        reduce_(reduce),
        slot_(slot),
        size_(ctx.size),
        rank_(ctx.rank),
        right_((ctx.rank + 1) % ctx.size),
        left_((ctx.rank + ctx.size - 1) % ctx.size),
        timeout_(ctx.getTimeout()),
        half_bytes_(std::max<size_t>(plan_.max_chunk(), 1) * esize) {
    for (const auto& s : spans) {
      buffers_.push_back(ctx.createUnboundBuffer(s.data, std::max<size_t>(s.count, 1) * esize));
    }
    sends_.assign(spans.size(), 0);
    // Two ranks have one reduce-scatter step, so one half.
    const int halves = std::min(2, ctx.size - 1);
    if (scratch.size() < halves * half_bytes_) scratch.resize(halves * half_bytes_);
    // A buffer per half: a wait counts completions of its own buffer, so
    // a step never takes the next step's arrival for one of its own.
    for (int h = 0; h < halves; ++h) {
      halves_[h] = scratch.data() + h * half_bytes_;
      half_bufs_[h] = ctx.createUnboundBuffer(halves_[h], half_bytes_);
    }
  }

  void Run(WaitScope& waits) {
    for (auto& h : half_bufs_) {
      if (h) waits.Add(h.get());
    }
    for (auto& b : buffers_) waits.Add(b.get());
    waits.Check();
    ReduceScatter(waits);
    Allgather(waits);
    for (size_t b = 0; b < buffers_.size(); ++b) {
      for (; sends_[b] > 0; --sends_[b]) waits.WaitSend(*buffers_[b], timeout_);
    }
  }

 private:
  int Chunk(int offset) const { return ((rank_ + offset) % size_ + size_) % size_; }
  std::vector<Piece> PiecesOf(int chunk) const {
    return plan_.Pieces(plan_.chunk_begin(chunk), plan_.chunk_end(chunk));
  }
  void Send(const Piece& p, uint64_t slot) {
    buffers_[p.span]->send(right_, slot, p.offset * esize_, p.count * esize_);
    ++sends_[p.span];
  }
  // Reduce-scatter step s receives chunk (rank - s - 1) into scratch half s % 2.
  void PostScatterRecvs(int step) {
    if (step > size_ - 2) return;
    size_t at = 0;
    for (const Piece& p : PiecesOf(Chunk(-step - 1))) {
      half_bufs_[step % 2]->recv(left_, slot_ + step, at, p.count * esize_);
      at += p.count * esize_;
    }
  }

  // Step s sends chunk (rank - s) and receives chunk (rank - s - 1), which
  // step s + 1 sends: each received piece goes on as soon as it is reduced,
  // and the last step's pieces, now fully reduced, start the allgather.
  void ReduceScatter(WaitScope& waits) {
    PostScatterRecvs(0);
    PostScatterRecvs(1);
    for (const Piece& p : PiecesOf(rank_)) Send(p, slot_);
    for (int step = 0; step < size_ - 1; ++step) {
      const bool last = step == size_ - 2;
      const uint64_t next_slot = last ? slot_ + size_ : slot_ + step + 1;
      const std::byte* in = halves_[step % 2];
      for (const Piece& p : PiecesOf(Chunk(-step - 1))) {
        waits.WaitRecv(*half_bufs_[step % 2], timeout_);
        auto* dst = static_cast<std::byte*>(spans_[p.span].data) + p.offset * esize_;
        reduce_(dst, dst, in, p.count);
        in += p.count * esize_;
        Send(p, next_slot);
      }
      // This half is consumed: step + 2 may land in it.
      PostScatterRecvs(step + 2);
    }
  }

  // Step t receives the reduced chunk (rank - t) into place and forwards it
  // (step t + 1 sends it) piece by piece. The receives all target distinct
  // chunks, so they are posted at once.
  void Allgather(WaitScope& waits) {
    for (int step = 0; step < size_ - 1; ++step) {
      for (const Piece& p : PiecesOf(Chunk(-step))) {
        buffers_[p.span]->recv(left_, slot_ + size_ + step, p.offset * esize_, p.count * esize_);
      }
    }
    for (int step = 0; step < size_ - 1; ++step) {
      for (const Piece& p : PiecesOf(Chunk(-step))) {
        waits.WaitRecv(*buffers_[p.span], timeout_);
        if (step < size_ - 2) Send(p, slot_ + size_ + step + 1);
      }
    }
  }

  RingPlan plan_;
  const std::vector<Backend::Span>& spans_;
  size_t esize_;
  ReduceFn reduce_;
  uint64_t slot_;
  int size_, rank_, right_, left_;
  std::chrono::milliseconds timeout_;
  size_t half_bytes_;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> buffers_;
  std::vector<size_t> sends_;  // per buffer: sends posted and not yet waited for
  std::byte* halves_[2] = {nullptr, nullptr};
  std::unique_ptr<gloo::transport::UnboundBuffer> half_bufs_[2];
};

}  // namespace

Status RingAllreduceSpans(const std::shared_ptr<gloo::Context>& ctx,
                          const std::vector<Backend::Span>& spans, size_t element_size,
                          ReduceFn reduce, uint64_t slot, std::vector<std::byte>* scratch) {
  size_t total = 0;
  for (const auto& s : spans) total += s.count;
  if (ctx->size == 1 || total == 0) return Status::Ok();
  try {
    PipelinedRing ring(*ctx, spans, element_size, reduce, slot, *scratch);
    WaitScope waits(*ctx, {});
    ring.Run(waits);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("gloo ring allreduce failed: ") + e.what());
  }
}

}  // namespace khorovod::gloo_ops
