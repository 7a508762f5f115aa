#include "backend/gloo/gloo_bound_allgather.h"

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include <cstring>
#include <exception>
#include <string>

namespace khorovod::gloo_ops {
namespace {

// First Gloo slot of the buffer sets (two per group). Bound buffers have a
// slot space of their own on each pair (unbound buffers' slots do not
// collide with them); nothing else in khorovod registers bound buffers.
constexpr int kSlotBase = 0x6b680;

template <typename Fn>
Status Guarded(const char* what, Fn&& fn) {
  try {
    fn();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("gloo ") + what + " failed: " + e.what());
  }
}

}  // namespace

BoundAllgather::BoundAllgather(std::shared_ptr<gloo::Context> ctx, size_t bytes, int group)
    : ctx_(std::move(ctx)), bytes_(bytes), slot_base_(kSlotBase + 2 * group) {}

BoundAllgather::~BoundAllgather() = default;

StatusOr<std::unique_ptr<BoundAllgather>> BoundAllgather::Create(
    std::shared_ptr<gloo::Context> ctx, size_t bytes, int group) {
  std::unique_ptr<BoundAllgather> exchange(new BoundAllgather(std::move(ctx), bytes, group));
  KH_RETURN_IF_ERROR(exchange->Register());
  return exchange;
}

Status BoundAllgather::Register() {
  const int size = ctx_->size, rank = ctx_->rank;
  return Guarded("bound allgather setup", [&] {
    for (int parity = 0; parity < 2; ++parity) {
      BufferSet& set = sets_[parity];
      set.send_memory.assign(bytes_, std::byte{0});
      set.recv_memory.assign(bytes_ * size, std::byte{0});
      set.send.resize(size);
      set.recv.resize(size);
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        auto& pair = ctx_->getPair(peer);
        set.send[peer] = pair->createSendBuffer(slot_base_ + parity, set.send_memory.data(), bytes_);
        set.recv[peer] = pair->createRecvBuffer(slot_base_ + parity,
                                                set.recv_memory.data() + bytes_ * peer, bytes_);
      }
    }
  });
}

Status BoundAllgather::Run(const void* in, void* out) {
  const int size = ctx_->size, rank = ctx_->rank;
  BufferSet& set = sets_[calls_++ & 1];
  auto* all = static_cast<std::byte*>(out);
  std::memcpy(set.send_memory.data(), in, bytes_);
  if (all + bytes_ * rank != in) std::memcpy(all + bytes_ * rank, in, bytes_);
  return Guarded("bound allgather", [&] {
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) set.send[peer]->send(0, bytes_);
    }
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      set.recv[peer]->waitRecv();
      std::memcpy(all + bytes_ * peer, set.recv_memory.data() + bytes_ * peer, bytes_);
    }
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) set.send[peer]->waitSend();
    }
  });
}

}  // namespace khorovod::gloo_ops
