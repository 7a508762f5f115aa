#include "backend/gloo/gloo_direct.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "bootstrap/interruptible_waits.h"

namespace khorovod::gloo_ops {

Status DirectAllreduce(const std::shared_ptr<gloo::Context>& ctx, const void* in, void* out,
                       size_t count, size_t element_size, ReduceFn reduce, uint64_t slot,
                       std::vector<std::byte>* scratch) {
  const size_t bytes = count * element_size;
  if (bytes == 0) return Status::Ok();
  const int size = ctx->size, rank = ctx->rank;
  if (size == 1) {
    if (in != out) std::memcpy(out, in, bytes);
    return Status::Ok();
  }
  if (scratch->size() < bytes * size) scratch->resize(bytes * size);
  std::byte* all = scratch->data();
  const auto* mine = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  // Whole elements per piece, so a reduction never splits one.
  const size_t piece = std::max<size_t>(kDirectPieceBytes / element_size, 1) * element_size;
  const size_t pieces = (bytes + piece - 1) / piece;
  try {
    const auto timeout = ctx->getTimeout();
    // One buffer per peer and direction: completions of one pair arrive in
    // the order they were posted, so the k-th wait on a peer's buffer means
    // its k-th piece is done.
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recv(size), send(size);
    WaitScope waits(*ctx, {});
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      recv[peer] = ctx->createUnboundBuffer(all + bytes * peer, bytes);
      send[peer] = ctx->createUnboundBuffer(const_cast<std::byte*>(mine), bytes);
      waits.Add(recv[peer].get());
      waits.Add(send[peer].get());
      for (size_t p = 0; p < pieces; ++p) {
        recv[peer]->recv(peer, slot, p * piece, std::min(piece, bytes - p * piece));
      }
    }
    waits.Check();
    for (size_t p = 0; p < pieces; ++p) {
      for (int peer = 0; peer < size; ++peer) {
        if (peer != rank)
          send[peer]->send(peer, slot, p * piece, std::min(piece, bytes - p * piece));
      }
    }
    std::vector<const std::byte*> from(size);
    for (size_t p = 0; p < pieces; ++p) {
      const size_t off = p * piece, len = std::min(piece, bytes - off);
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        waits.WaitRecv(*recv[peer], timeout);
        waits.WaitSend(*send[peer], timeout);
        from[peer] = all + bytes * peer + off;
      }
      from[rank] = mine + off;
      if (in == out && rank >= 2) {
        // The first reductions below write this rank's piece before it is read.
        std::memcpy(all + bytes * rank + off, mine + off, len);
        from[rank] = all + bytes * rank + off;
      }
      reduce(dst + off, from[0], from[1], len / element_size);
      for (int r = 2; r < size; ++r) reduce(dst + off, dst + off, from[r], len / element_size);
    }
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("gloo direct allreduce failed: ") + e.what());
  }
}

}  // namespace khorovod::gloo_ops
