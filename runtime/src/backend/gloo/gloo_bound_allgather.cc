#include "backend/gloo/gloo_bound_allgather.h"

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include <cstring>

#include "backend/gloo/gloo_ops.h"

namespace khorovod::gloo_ops {
namespace {

// First Gloo slot of the buffer sets (two per group). Bound buffers have a
// slot space of their own on each pair (unbound buffers' slots do not
// collide with them); nothing else in khorovod registers bound buffers.
constexpr int kSlotBase = 0x6b680;

}  // namespace

BoundAllgather::BoundAllgather(std::shared_ptr<gloo::Context> ctx, size_t bytes, int group)
    : ctx_(std::move(ctx)), bytes_(bytes), slot_base_(kSlotBase + 2 * group) {}

BoundAllgather::~BoundAllgather() = default;

StatusOr<std::unique_ptr<BoundAllgather>> BoundAllgather::Create(std::shared_ptr<gloo::Context> ctx,
                                                                 size_t bytes, int group) {
  std::unique_ptr<BoundAllgather> exchange(new BoundAllgather(std::move(ctx), bytes, group));
  KH_RETURN_IF_ERROR(exchange->Register());
  return exchange;
}

Status BoundAllgather::Register() {
  const int size = ctx_->size, rank = ctx_->rank;
  const size_t message = message_bytes();
  return Guarded("bound allgather setup", [&] {
    for (int parity = 0; parity < 2; ++parity) {
      BufferSet& set = sets_[parity];
      set.send_memory.assign(message, std::byte{0});
      set.recv_memory.assign(message * size, std::byte{0});
      set.send.resize(size);
      set.recv.resize(size);
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        auto& pair = ctx_->getPair(peer);
        set.send[peer] =
            pair->createSendBuffer(slot_base_ + parity, set.send_memory.data(), message);
        set.recv[peer] = pair->createRecvBuffer(slot_base_ + parity,
                                                set.recv_memory.data() + message * peer, message);
      }
    }
  });
}

bool BoundAllgather::Arrived(const BufferSet& set, int peer, uint64_t call) const {
  const size_t message = message_bytes();
  uint64_t trailer = 0;
  std::memcpy(&trailer, set.recv_memory.data() + message * peer + bytes_, sizeof trailer);
  return trailer == call;
}

Status BoundAllgather::Run(const void* in, void* out) {
  const int size = ctx_->size, rank = ctx_->rank;
  const size_t message = message_bytes();
  const uint64_t call = ++calls_;
  BufferSet& set = sets_[call & 1];
  auto* all = static_cast<std::byte*>(out);
  std::memcpy(set.send_memory.data(), in, bytes_);
  std::memcpy(set.send_memory.data() + bytes_, &call, sizeof call);
  if (all + bytes_ * rank != in) std::memcpy(all + bytes_ * rank, in, bytes_);
  for (int peer = 0; peer < size; ++peer) {
    // A failed send shows as its peer's failed receive below, unless that
    // peer already delivered this call and left: then the round holds.
    if (peer != rank) (void)Guarded("bound allgather", [&] { set.send[peer]->send(0, message); });
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    Status received = Guarded("bound allgather", [&] { set.recv[peer]->waitRecv(); });
    // Gloo reports a pair's failure before a receive it completed, so a
    // peer that sent its message and then closed (the last round before a
    // shutdown) would fail a round whose data is all here. The trailer,
    // written last, tells a whole message of this call from a partial or
    // older one.
    if (!received.ok() && !Arrived(set, peer, call)) return received;
    std::memcpy(all + bytes_ * peer, set.recv_memory.data() + message * peer, bytes_);
  }
  for (int peer = 0; peer < size; ++peer) {
    // Every peer's message arrived, so a peer whose send failed has ended
    // its side of the round; the next call on its pair reports it.
    if (peer != rank) (void)Guarded("bound allgather", [&] { set.send[peer]->waitSend(); });
  }
  return Status::Ok();
}

}  // namespace khorovod::gloo_ops
