// BoundAllgather: a fixed-size, repeated allgather over Gloo's bound
// (pre-registered) buffers: one TCP message per peer per call.
//
// Why: the negotiation exchanges the same number of words with every peer
// in every round (core/negotiator.h). Over Gloo's unbound buffers each such
// exchange is a rendezvous: the receiver announces its receive
// (NOTIFY_RECV_READY), the sender announces its send (NOTIFY_SEND_READY),
// and only then does the data travel: three messages per peer and
// direction, each a system call on both sides and a wake-up of the
// receiver's Gloo event loop, and the data waits a network hop for the
// announcement. Across hosts that made the round cost far more CPU than
// torch's one Gloo allreduce of the same bytes. A bound buffer is
// registered with its pair once, so a send is the data alone, written at
// once into the peer's buffer: one message per peer.
//
// Safety of reusing the buffers: calls alternate between two buffer sets
// (by parity, each its own Gloo slot). A peer can send into this rank's set
// p again only in call k+2, which it starts after receiving this rank's
// call k+1 message, which this rank sends only after it copied call k's
// data out of set p. Every call of one BoundAllgather must be made by every
// rank in the same order (the control channel's calls are).
//
// Each message carries the call's number after the data, so a receive that
// Gloo reports failed (a pair closed after its message arrived) still
// counts when the whole message of this call is there.
//
// Failures: a dead peer, or a pair failed by AbandonMesh (elastic
// re-formation), wakes the waits with Gloo's exception: kUnavailable,
// unless that peer's message of this call had already arrived.
//
// Thread-safety: one call at a time; the pairs of `ctx` must stay connected
// for the object's lifetime (the control channel holds both).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "khorovod/status.h"

namespace gloo {
class Context;
namespace transport {
class Buffer;
}
}  // namespace gloo

namespace khorovod::gloo_ops {

class BoundAllgather {
 public:
  // Registers the receive buffers of `bytes` per peer (both sets) with
  // every pair of `ctx`, under Gloo slots of their own: `group` tells apart
  // the BoundAllgathers of one context (the same on every rank).
  // kUnavailable when Gloo refuses (a failed pair).
  static StatusOr<std::unique_ptr<BoundAllgather>> Create(std::shared_ptr<gloo::Context> ctx,
                                                          size_t bytes, int group);
  ~BoundAllgather();
  BoundAllgather(const BoundAllgather&) = delete;
  BoundAllgather& operator=(const BoundAllgather&) = delete;

  size_t bytes() const { return bytes_; }
  // What one call sends each peer: the data, then the call's number.
  size_t message_bytes() const { return bytes_ + sizeof(uint64_t); }
  // `in` holds bytes(); `out` receives bytes() * size, rank r's at r * bytes().
  Status Run(const void* in, void* out);

 private:
  BoundAllgather(std::shared_ptr<gloo::Context> ctx, size_t bytes, int group);
  Status Register();

  // A message is bytes_ of data, then the call's number (uint64_t).
  struct BufferSet {
    std::vector<std::byte> send_memory;  // one message
    std::vector<std::byte> recv_memory;  // one message per rank, peer r's r-th
    std::vector<std::unique_ptr<gloo::transport::Buffer>> send;  // per peer (null: self)
    std::vector<std::unique_ptr<gloo::transport::Buffer>> recv;  // per peer (null: self)
  };

  // Whether `peer`'s message of call `call` is whole in `set`.
  bool Arrived(const BufferSet& set, int peer, uint64_t call) const;

  std::shared_ptr<gloo::Context> ctx_;
  size_t bytes_;
  int slot_base_;
  std::array<BufferSet, 2> sets_;
  uint64_t calls_ = 0;
};

}  // namespace khorovod::gloo_ops
