// Eager allreduce: small cached allreduces that travel with the negotiation
// exchange instead of after it.
//
// In a steady-state round every rank already sends its ready bits to every
// other rank (core/negotiator.h, step 2). Each rank also appends to that
// message the prescaled data of its ready, cached, small host allreduces, up
// to kEagerPayloadWords in all. A tensor that turns out to be ready on every
// rank, and whose data every rank appended, is then reduced locally on every
// rank from the contributions in rank order: the same arithmetic in the same
// order as the one-hop exchange the Gloo backend uses for small buffers, so
// every rank gets a bit-identical result, equal to the non-eager path's, and
// the step costs one exchange instead of two. Anything else (a rank joined,
// a rank's payload was full) simply takes the normal path; nothing is lost.
//
// Wire layout of the payload, kEagerPayloadWords uint64 words on every rank
// (a fixed size, so the exchange needs no length round):
//   word 0:      number of words used after it
//   per entry:   header word (slot << 32 | byte count), then the data padded
//                to whole words.
//
// Thread-safety: none; used by the background thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "core/message.h"
#include "core/tensor_queue.h"
#include "khorovod/status.h"

namespace khorovod {

// 1 KiB of payload per rank per round: room for the scalars and small
// vectors (losses, metrics, biases) whose latency this path is for.
inline constexpr size_t kEagerPayloadWords = 128;

// Whether a cached response may take the eager path; identical on every
// rank because it depends on the response alone.
bool EagerEligible(const Response& response);

// Fills one rank's payload block (kEagerPayloadWords words, zeroed by the
// caller) entry by entry.
class EagerPayloadWriter {
 public:
  explicit EagerPayloadWriter(uint64_t* block) : block_(block) {}

  // Appends op's input, prescaled as `response` says, for cache slot `slot`.
  // Returns false, appending nothing, when it does not fit or the op's
  // buffers are not host memory of the response's size.
  bool Append(uint32_t slot, const PendingOp& op, const Response& response);

 private:
  uint64_t* block_;
  size_t used_ = 0;  // words after word 0
};

// One rank's entries: slot -> (data, bytes), pointing into the block.
struct EagerContribution {
  const std::byte* data = nullptr;
  size_t bytes = 0;
};
using EagerEntries = std::map<uint32_t, EagerContribution>;

// Parses a peer's block. A malformed block (a lengths that overruns it) is
// an error naming `rank`: the peer runs a different protocol version.
Status ParseEagerPayload(const uint64_t* block, int rank, EagerEntries* out);

// out = reduce over ranks, in rank order, of contributions[r] (each
// response.total_elements() elements), then averaged and post-scaled as the
// response says.
void ReduceEager(const Response& response, const std::vector<const std::byte*>& contributions,
                 void* out);

}  // namespace khorovod
