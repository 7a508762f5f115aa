#include "backend/gloo/gloo_ops.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/context.h>

#include <cstring>
#include <exception>
#include <numeric>
#include <string>

#include "bootstrap/interruptible_waits.h"

namespace khorovod::gloo_ops {
namespace {

// Gloo's typed setters only use the element size; pick a placeholder type of
// the right width and let our reduce function interpret the bytes.
template <typename Placeholder>
void RunAllreduce(const std::shared_ptr<gloo::Context>& ctx, const void* in, void* out,
                  size_t count, ReduceFn reduce) {
  gloo::AllreduceOptions opts(ctx);
  if (in != out) {
    opts.setInput(static_cast<Placeholder*>(const_cast<void*>(in)), count);
  }
  opts.setOutput(static_cast<Placeholder*>(out), count);
  opts.setReduceFunction(reduce);
  gloo::allreduce(opts);
}

}  // namespace

Status Allreduce(const std::shared_ptr<gloo::Context>& ctx, const void* in, void* out, size_t count,
                 size_t element_size, ReduceFn reduce) {
  if (count == 0) return Status::Ok();
  return Guarded("allreduce", [&] {
    switch (element_size) {
      case 1:
        RunAllreduce<uint8_t>(ctx, in, out, count, reduce);
        break;
      case 2:
        RunAllreduce<uint16_t>(ctx, in, out, count, reduce);
        break;
      case 4:
        RunAllreduce<uint32_t>(ctx, in, out, count, reduce);
        break;
      case 8:
        RunAllreduce<uint64_t>(ctx, in, out, count, reduce);
        break;
      default:
        throw std::invalid_argument("unsupported element size " + std::to_string(element_size));
    }
  });
}

Status DirectAllgather(const std::shared_ptr<gloo::Context>& ctx, const void* in, size_t bytes,
                       void* out, uint64_t slot) {
  const int size = ctx->size, rank = ctx->rank;
  auto* all = static_cast<std::byte*>(out);
  std::byte* mine = all + bytes * rank;
  if (in != mine) std::memmove(mine, in, bytes);
  if (size == 1 || bytes == 0) return Status::Ok();
  return Guarded("direct allgather", [&] {
    auto recv_buf = ctx->createUnboundBuffer(all, bytes * size);
    auto send_buf = ctx->createUnboundBuffer(mine, bytes);
    WaitScope waits(*ctx, {recv_buf.get(), send_buf.get()});
    waits.Check();
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) recv_buf->recv(peer, slot, bytes * peer, bytes);
    }
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) send_buf->send(peer, slot);
    }
    const auto timeout = ctx->getTimeout();
    for (int i = 1; i < size; ++i) waits.WaitRecv(*recv_buf, timeout);
    for (int i = 1; i < size; ++i) waits.WaitSend(*send_buf, timeout);
  });
}

Status AllgathervBytes(const std::shared_ptr<gloo::Context>& ctx, const void* in, void* out,
                       const std::vector<size_t>& bytes) {
  if (std::accumulate(bytes.begin(), bytes.end(), size_t{0}) == 0) return Status::Ok();
  return Guarded("allgatherv", [&] {
    gloo::AllgathervOptions opts(ctx);
    opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), bytes[ctx->rank]);
    opts.setOutput(static_cast<uint8_t*>(out), bytes);
    gloo::allgatherv(opts);
  });
}

// A binomial tree on unbound buffers, registered with the context's
// InterruptibleWaits: Gloo's own broadcast waits on buffers nobody can
// abort, so a receiver whose root died mid-broadcast (an elastic state sync)
// waited out the whole transport timeout even after its generation was
// abandoned. In virtual ranks (the root is 0), rank v receives from v minus
// its highest set bit, then sends to v + m for every power of two m above
// v's highest bit while that is a rank.
Status BroadcastBytes(const std::shared_ptr<gloo::Context>& ctx, void* buffer, size_t bytes,
                      int root) {
  const int size = ctx->size;
  if (bytes == 0 || size == 1) return Status::Ok();
  constexpr uint64_t kBroadcastSlot = uint64_t{0x7b} << 56;
  return Guarded("broadcast", [&] {
    const int vrank = (ctx->rank - root + size) % size;
    auto buf = ctx->createUnboundBuffer(buffer, bytes);
    WaitScope waits(*ctx, {buf.get()});
    waits.Check();
    const auto timeout = ctx->getTimeout();
    int high = 0;  // vrank's highest set bit (0 for the root)
    for (int bit = 1; bit > 0 && bit <= vrank; bit <<= 1) high = bit;
    if (vrank != 0) {
      buf->recv((vrank - high + root) % size, kBroadcastSlot);
      waits.WaitRecv(*buf, timeout);
    }
    int children = 0;
    for (int m = high == 0 ? 1 : high << 1; m > 0 && vrank + m < size; m <<= 1) {
      buf->send((vrank + m + root) % size, kBroadcastSlot);
      ++children;
    }
    for (int i = 0; i < children; ++i) waits.WaitSend(*buf, timeout);
  });
}

Status AlltoallvBytes(const std::shared_ptr<gloo::Context>& ctx, const void* in,
                      const std::vector<int64_t>& send_bytes, void* out,
                      const std::vector<int64_t>& recv_bytes) {
  return Guarded("alltoallv", [&] {
    gloo::AlltoallvOptions opts(ctx);
    opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), send_bytes);
    opts.setOutput(static_cast<uint8_t*>(out), recv_bytes);
    gloo::alltoallv(opts);
  });
}

Status Barrier(const std::shared_ptr<gloo::Context>& ctx) {
  if (ctx->size == 1) return Status::Ok();
  return Guarded("barrier", [&] {
    gloo::BarrierOptions opts(ctx);
    gloo::barrier(opts);
  });
}

}  // namespace khorovod::gloo_ops
